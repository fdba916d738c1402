"""Stage 5, reciprocal rank fusion of the retrieval arms."""

from __future__ import annotations

from .records import Candidate, Memory


def reciprocal_rank_fusion(
    ranked_lists: dict[str, list[tuple[Memory, float]]], k: int = 60
) -> list[Candidate]:
    """Fuse ranked lists by summing 1 / (k + rank) for each list a memory appears in.

    Cormack, Clarke and Buettcher, "Reciprocal Rank Fusion outperforms Condorcet and individual Rank
    Learning Methods" (SIGIR 2009); k = 60 is their constant. Ties break by memory id so the order
    is deterministic.
    """
    by_id: dict[str, Candidate] = {}
    for arm, hits in ranked_lists.items():
        for rank, (memory, score) in enumerate(hits, start=1):
            key = str(memory.id)
            cand = by_id.get(key)
            if cand is None:
                cand = by_id[key] = Candidate(memory=memory)
            if arm in cand.ranks:  # the same memory twice in one list: keep its best rank
                continue
            cand.ranks[arm] = rank
            cand.arm_scores[arm] = score
            cand.score += 1.0 / (k + rank)
    return sorted(by_id.values(), key=lambda c: (-c.score, str(c.memory.id)))
