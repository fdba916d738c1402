"""Stage 5, fusion of the retrieval arms into one ranking.

Two methods (``recall.fusion``):

- ``score`` (default): the weighted sum (``recall.arm_weights``) of each arm's score, normalised as
  the arm declares (``pipeline/recall/arms.py``): BM25 over the query's best BM25, cosine as it
  is, and the graph and temporal arms' scores (already in [0, 1]) as they are. The store arms
  score every candidate exactly, so each is judged on both. It beats RRF on the LoCoMo
  development set (offline, MiniLM; R@1 0.368 against 0.271): RRF gives a weak arm's first hit
  the same weight as a strong arm's, whatever the scores say. The optimum is flat in the weights,
  so the store arms' equal default weights are not a fit to the development set.
- ``rrf``: reciprocal rank fusion, kept for comparison and for lists without comparable scores.
- ``rrf_vector``: ``recall.rrf_vector.rrf`` x RRF normalised by the best RRF score plus
  ``recall.rrf_vector.vector`` x the best cosine similarity over the query texts (0.6 / 0.4).
"""

from __future__ import annotations

from memlane.pipeline.recall.arms import REGISTRY
from memlane.pipeline.recall.candidates import Retrieved
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Candidate, Memory, stable_key


def reciprocal_rank_fusion(
    ranked_lists: dict[str, list[tuple[Memory, float]]], k: int = 60
) -> list[Candidate]:
    """Fuse ranked lists by summing 1 / (k + rank) for each list a memory appears in.

    Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual Rank
    Learning Methods" (SIGIR 2009); k = 60 is their constant. Ties break by content and date so
    the order is the same in every run.
    """
    by_id: dict[str, Candidate] = {}
    for arm, hits in ranked_lists.items():
        seen: set[str] = set()
        for rank, (memory, score) in enumerate(hits, start=1):
            key = str(memory.id)
            if key in seen:  # the same memory twice in one list: keep its best rank
                continue
            seen.add(key)
            cand = by_id.get(key)
            if cand is None:
                cand = by_id[key] = Candidate(memory=memory)
            cand.arm_scores[arm] = score
            cand.score += 1.0 / (k + rank)
    return sorted(by_id.values(), key=lambda c: (-c.score, *stable_key(c.memory)))


def score_fusion(retrieved: Retrieved, weights: dict[str, float]) -> list[Candidate]:
    """Weighted sum of per-arm scores, each normalised as its arm declares: ``max`` divides by the
    best score of this query on that arm (so 1.0 is the best keyword match whatever the corpus),
    ``none`` keeps it (cosine similarity). An arm a candidate has no score on adds nothing."""
    best: dict[str, float] = {}
    for scores in retrieved.scores.values():
        for arm, value in scores.items():
            best[arm] = max(best.get(arm, 0.0), value)
    out = []
    for key, scores in retrieved.scores.items():
        total = 0.0
        for arm, value in scores.items():
            spec = REGISTRY.get(arm)
            if spec is not None and spec.normalise == "max":
                value = value / best[arm] if best.get(arm, 0.0) > 0 else 0.0
            total += weights.get(arm, 1.0) * value
        out.append(Candidate(memory=retrieved.memories[key], score=total, arm_scores=dict(scores)))
    return sorted(out, key=lambda c: (-c.score, *stable_key(c.memory)))


def _with_exact_scores(fused: list[Candidate], retrieved: Retrieved) -> list[Candidate]:
    """RRF keeps a memory's score from the lists it ranks in; the threshold stage (and rrf_vector)
    need its exact score on every arm, best over the query texts."""
    for c in fused:
        c.arm_scores = dict(retrieved.scores.get(str(c.memory.id), c.arm_scores))
    return fused


def rrf_vector_fusion(
    retrieved: Retrieved, k: int, rrf_weight: float, vector_weight: float
) -> list[Candidate]:
    """RRF, normalised so the best candidate has 1.0, blended with the candidate's best cosine
    similarity: rank agreement across lists, and the dense arm's absolute evidence."""
    fused = _with_exact_scores(reciprocal_rank_fusion(retrieved.lists, k=k), retrieved)
    best = max((c.score for c in fused), default=0.0)
    for c in fused:
        norm = c.score / best if best > 0 else 0.0
        c.score = rrf_weight * norm + vector_weight * c.arm_scores.get("vector", 0.0)
    return sorted(fused, key=lambda c: (-c.score, *stable_key(c.memory)))


def lift_neighbours(fused: list[Candidate], weight: float, window: int) -> int:
    """Session-level evidence: a candidate whose sequence neighbours (same source, at most
    ``window`` positions away) are candidates too gets ``weight`` x the best of their scores, halved
    per position beyond the first. A conversation answers a question over a few turns (the question
    in one, the answer in the next, a detail two turns on) and one turn alone often matches weakly;
    scores are lifted from the fused scores before any lift, so the order of candidates does not
    matter. Returns how many were lifted; re-sorting is the caller's."""
    if weight <= 0 or window <= 0:
        return 0
    groups: dict[tuple[str, str], list[tuple[int, Candidate]]] = {}  # (project, source) -> (position, c)
    for c in fused:
        m = c.memory
        if m.source is not None and m.position is not None:
            groups.setdefault((m.project, m.source), []).append((m.position, c))
    base = {id(c): c.score for c in fused}
    lifted = 0
    for group in groups.values():
        if len(group) < 2:
            continue
        at = dict(group)
        for position, c in group:
            best = 0.0
            for d in range(1, window + 1):
                for n in (at.get(position - d), at.get(position + d)):
                    if n is not None:
                        best = max(best, base[id(n)] * 0.5 ** (d - 1))
            if best > 0:
                c.score = base[id(c)] + weight * best
                lifted += 1
    return lifted


def fuse(ctx: RecallContext, retrieved: Retrieved) -> Step[list[Candidate]]:
    cfg = ctx.config.recall
    if cfg.fusion == "rrf_vector":
        w = cfg.rrf_vector
        fused = rrf_vector_fusion(retrieved, cfg.rrf_k, w.rrf, w.vector)
    elif cfg.fusion == "rrf":
        fused = _with_exact_scores(reciprocal_rank_fusion(retrieved.lists, k=cfg.rrf_k), retrieved)
    else:
        fused = score_fusion(retrieved, cfg.arm_weights)
    detail: dict[str, str | int] = {"method": cfg.fusion}
    lifted = lift_neighbours(fused, cfg.neighbour_lift, cfg.neighbour_window)
    if lifted:
        fused.sort(key=lambda c: (-c.score, *stable_key(c.memory)))
        detail["neighbours_lifted"] = lifted
    return Step(fused, detail=detail)
