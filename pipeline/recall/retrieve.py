"""Stage 4, retrieval: every registered arm (``pipeline/recall/arms.py``) for the question and every
synthesised variant, plus the HyDE passage on the arms that need an embedding.

The question and variants are embedded as queries, the HyDE passage as a passage; an embedder whose
cosines are not on the reference scale has them calibrated here (``Embedder.calibrate``), so every
later stage (fusion, the relevance floor, the trace) reads one scale whatever the model.

Each store arm that needs no embedding (keyword) finds its top k alone, on its own connection,
while the texts are embedded. If it is still running when the embedding is done, the arms that need
the embedding start alone too, so the slowest sets the pace instead of their sum; otherwise they
select their top k inside the statement that scores the union. Either way one SQL statement per
query text scores the union on every arm. The per-text statements run concurrently, bounded by
``MAX_PARALLEL_SEARCHES``. Python arms (graph, temporal) run last, with the store arms' hits as
entry points; what they read from the question alone (``Arm.prepare``) starts with the embedding.
An arm that can start from the keyword arm's hits (``Arm.early``: the graph) starts as soon as they
are in, beside the embedding; its hits the keyword arm did not return are scored on every store
arm by a statement of their own, beside the per-text statements.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.providers.embedding.embedders import embed_texts
from memlane.pipeline.recall import arms as arm_registry
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Memory, Query, stable_key

log = logging.getLogger(__name__)

# Concurrent per-text statements of one recall. Each holds a pool connection; two leave room in the
# default pool of 8 for other requests, and with up to 4 texts (question, 2-3 variants) and HyDE
# the gain over sequential is already most of what parallelism can give on a 2-core machine.
MAX_PARALLEL_SEARCHES = 2


@dataclass(slots=True)
class Retrieved:
    """Ranked lists per arm and query text (``vector``, ``keyword``, ``vector:1``, ``vector:hyde``...),
    plus every candidate's exact score on each active arm (the best over the query texts)."""

    arms: tuple[str, ...] = field(default_factory=arm_registry.names)
    lists: dict[str, list[tuple[Memory, float]]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # memory id -> arm -> score
    memories: dict[str, Memory] = field(default_factory=dict)
    vectors: list = field(default_factory=list)  # the query texts' embeddings (Python arms reuse them)
    notes: dict[str, object] = field(default_factory=dict)  # arm -> what it did, for the stage's detail
    embedding: list[float] | None = None  # the question's, when an arm needed one (the graph arm reuses it)
    details: dict[str, dict] = field(default_factory=dict)  # per Python arm: what it did (the trace)
    terms: Any = None  # the question's QueryTerms (store/search.py), when the keyword arm read them
    prepared: dict[str, asyncio.Future] = field(default_factory=dict)  # Python arm -> its early reads

    def add(self, suffix: str, hits) -> None:
        for arm in self.arms:
            ranked = sorted(
                (h for h in hits if arm in h.found_by), key=lambda h: (-h.scores[arm], *stable_key(h.memory))
            )
            if ranked:
                self.lists[arm + suffix] = [(h.memory, h.scores[arm]) for h in ranked]
        for h in hits:
            key = str(h.memory.id)
            self.memories[key] = h.memory
            best = self.scores.setdefault(key, {})
            for arm in self.arms:
                if arm in h.scores:
                    best[arm] = max(best.get(arm, float("-inf")), h.scores[arm])

    def add_exact(self, memory: Memory, scores: dict[str, float]) -> None:
        """Exact scores a Python arm computed for a memory on other arms; a score already there
        (from the store arms) is kept."""
        key = str(memory.id)
        self.memories.setdefault(key, memory)
        best = self.scores.setdefault(key, {})
        for arm, score in scores.items():
            best.setdefault(arm, score)

    def add_scores(self, hits) -> None:
        """Exact scores on the store arms for memories a Python arm found, without adding them to
        the store arms' ranked lists (they were not in their top k)."""
        for h in hits:
            key = str(h.memory.id)
            self.memories.setdefault(key, h.memory)
            best = self.scores.setdefault(key, {})
            for arm in self.arms:
                if arm in h.scores:
                    best[arm] = max(best.get(arm, float("-inf")), h.scores[arm])

    def add_list(self, arm: str, ranked: list[tuple[Memory, float]]) -> None:
        """A Python arm's ranked list: it scores only its own hits."""
        if not ranked:
            return
        self.lists[arm] = ranked
        for memory, score in ranked:
            key = str(memory.id)
            self.memories.setdefault(key, memory)
            best = self.scores.setdefault(key, {})
            best[arm] = max(best.get(arm, float("-inf")), score)


async def retrieve(ctx, query: Query) -> Step[Retrieved]:
    active = arm_registry.resolve(ctx.arms)
    # The Python arms' reads that need only the question start now, beside the embedding.
    prepared = {a.name: asyncio.ensure_future(a.prepare(ctx, query)) for a in active if a.prepare}
    try:
        return await _retrieve(ctx, query, active, prepared)
    finally:
        for f in prepared.values():
            f.cancel()
            if f.done() and not f.cancelled():
                f.exception()  # (an arm that ran reported it; one that did not, e.g. no embedding, needs none)


async def _retrieve(ctx, query: Query, active, prepared: dict[str, asyncio.Future]) -> Step[Retrieved]:
    req, cfg = ctx.request, ctx.config.recall
    store_arms = tuple(a.name for a in active if a.in_store)
    texts = [query.text, *query.variants]
    wants_embedding = any("embedding" in a.needs for a in active)
    to_embed = texts + ([query.hypothetical] if query.hypothetical else [])
    filters = {
        "project": req.project,
        "k": cfg.candidates_per_arm,
        "category": req.category,
        "tags": req.tags,
        "common_df": cfg.keyword_common_df,
        "topics": req.topics,
        "fact_types": req.fact_types,
    }
    early = [a.name for a in active if a.in_store and "embedding" not in a.needs]
    degraded: str | None = None
    preselected: list[dict[str, list]] = [{} for _ in texts]
    terms: list = [None for _ in texts]  # per text: its QueryTerms, read by the keyword arm's statement
    vectors: list = []
    starts: dict[str, asyncio.Future] = {}  # Python arm -> its run from the text-only arms' hits
    if wants_embedding:
        tasks = {
            (i, name): asyncio.ensure_future(ctx.store.candidates(name, query=t, **filters))
            for i, t in enumerate(texts)
            for name in early
        }
        if tasks:
            starts = {
                a.name: asyncio.ensure_future(_start_early(a, ctx, query, dict(tasks), prepared))
                for a in active
                if a.early is not None
            }
        try:
            try:
                vectors = await embed_texts(
                    ctx.embedder,
                    to_embed,
                    ctx.config.embedding.embed_timeout_s,
                    encode=lambda _: embed(ctx.embedder, texts, query.hypothetical),
                )
            except EmbeddingFailed as e:
                if not early:
                    raise  # no active arm can answer without the embedding
                # The arms that need no embedding (keyword) still answer: a recall from words alone
                # beats no recall. The trace says so.
                degraded, vectors = str(e), []
                log.warning("recall without its embedding arms: %s", e)
                active = [a for a in active if "embedding" not in a.needs]
                store_arms = tuple(a.name for a in active if a.in_store)
            if vectors:
                ctx.query_embedding = vectors[0]  # stage 8's category match reuses it
                # The arms that needed the embedding start now if the others are still running;
                # otherwise each text's one scoring statement selects their candidates itself (one
                # round trip less, usually: the keyword arm is done before the embedding is).
                if not all(t.done() for t in tasks.values()):
                    late = [a.name for a in active if a.in_store and "embedding" in a.needs]
                    for i, t in enumerate(texts):
                        for name in late:
                            tasks[(i, name)] = asyncio.ensure_future(
                                ctx.store.candidates(name, query=t, embedding=vectors[i], **filters)
                            )
            for (i, name), (ids, _, found_terms) in zip(
                tasks, await asyncio.gather(*tasks.values()), strict=True
            ):
                preselected[i][name] = ids
                if found_terms is not None:
                    terms[i] = found_terms
        except BaseException:
            _cancel(starts.values())
            raise
        finally:
            for t in tasks.values():
                t.cancel()

    limit = asyncio.Semaphore(MAX_PARALLEL_SEARCHES)

    cosine_arms = [a.name for a in active if a.in_store and a.needs == {"embedding"}]

    async def search(text: str, embedding, selected: tuple[str, ...], pre: dict[str, list], read_terms=None):
        async with limit:
            hits = await ctx.store.search(
                query=text,
                embedding=embedding,
                arms=selected,
                preselected=pre,
                terms=read_terms,
                **filters,
            )
        return calibrated(ctx.embedder, hits, cosine_arms)

    # The early arms' hits the text-only arms did not return are scored beside the per-text
    # statements (on another connection), as soon as both the embedding and those hits are there.
    # (Scoring them in the question's statement instead, when the arm is done before the
    # embedding: no faster at 100,000 memories, p50 paired.)
    known = {m for pre in preselected for ids in pre.values() for m in ids}
    names = [n for n in starts if arm_registry.REGISTRY[n] in active]
    jobs = [
        (
            ("" if i == 0 else f":{i}"),
            search(t, vectors[i] if vectors else None, store_arms, preselected[i], terms[i]),
        )
        for i, t in enumerate(texts)
    ]
    if query.hypothetical and vectors:
        embedding_arms = tuple(n for n in store_arms if arm_registry.REGISTRY[n].needs == {"embedding"})
        if embedding_arms:
            jobs.append((":hyde", search("", vectors[-1], embedding_arms, {})))
    out = Retrieved(
        arms=tuple(a.name for a in active),
        vectors=list(vectors),
        embedding=vectors[0] if vectors else None,
        terms=terms[0],
        prepared=prepared,
    )
    try:
        *found, started = await asyncio.gather(
            *(job for _, job in jobs),
            asyncio.gather(
                *(_score_early(ctx, query, starts[n], known, out.embedding, terms[0]) for n in names)
            ),
        )
    finally:
        _cancel(starts.values())
    for (suffix, _), hits in zip(jobs, found, strict=True):
        out.add(suffix, hits)
    by_store = set(out.memories)  # what the store arms returned (the early arms' own hits come next)
    ran_early = set()
    for name, result in zip(names, started, strict=True):
        if result is None:  # nothing to start from: it runs after the store arms
            continue
        expansion, hits = result
        out.add_scores(hits)
        out.details[name] = expansion.detail
        only_its = [m for m, _ in expansion.ranked if str(m) not in by_store]
        out.add_list(name, ranked_memories(ctx, expansion, out, only_its))
        ran_early.add(name)
    for arm in active:
        if not arm.in_store and arm.name not in ran_early:
            out.add_list(arm.name, await arm.run(ctx, query, out))
    _keep_admitted(out, req)
    detail = {"arms": {name: len(hits) for name, hits in out.lists.items()}, **out.notes, **out.details}
    if vectors and ctx.embedder.calibration is not None:
        detail["calibration"] = {"model": ctx.embedder.model_id, **ctx.embedder.calibration}
    if degraded is not None:
        return Step(
            out, status=f"degraded: {degraded}; answered by {', '.join(store_arms)} only", detail=detail
        )
    return Step(out, detail=detail)


def _cancel(futures) -> None:
    for f in futures:
        f.cancel()
        if f.done() and not f.cancelled():
            f.exception()  # (raised where it was awaited, or not needed: the recall failed first)


async def _start_early(arm, ctx, query: Query, tasks: dict, prepared: dict[str, asyncio.Future]):
    """A Python arm's run from the text-only store arms' hits (each memory's best score over the
    query texts, each text's scores divided by its best), started as soon as those are in; None
    when they found nothing (the arm then runs after every store arm, from their fused hits)."""
    seeds: dict = {}
    for ids, scores, _ in await asyncio.gather(*tasks.values()):
        best = max(scores or (), default=0.0)
        if best <= 0:
            continue
        for m, score in zip(ids, scores, strict=True):
            seeds[m] = max(seeds.get(m, 0.0), score / best)
    if not seeds:
        return None
    return await arm.early(ctx, query, seeds, prepared.get(arm.name))


async def _score_early(ctx, query: Query, start: asyncio.Future, known: set, embedding, terms):
    """An early arm's result, with the store arms' exact scores of its hits they did not return."""
    expansion = await start
    if expansion is None:
        return None
    unknown = [m for m, _ in expansion.ranked if m not in known]
    return expansion, await score_ids(ctx, query, expansion, unknown, embedding, terms)


async def score_ids(ctx, query: Query, found, ids: list, embedding, terms) -> list:
    """Exact scores on the store arms (cosine, BM25 of the question) of memories a Python arm found
    (``found``: its result, whose detail counts the statement) and the store arms did not return;
    for ``Retrieved.add_scores`` (not added to their lists)."""
    if not ids:
        return []
    found.detail["queries"] = found.detail.get("queries", 0) + 1
    first = "vector" if embedding is not None else "keyword"
    hits = await ctx.store.search(
        project=ctx.request.project,
        query=query.text,
        embedding=embedding,
        k=len(ids),
        arms=(first,),
        preselected={first: ids},
        common_df=ctx.config.recall.keyword_common_df,
        terms=terms,  # (the question's, as the keyword arm read them)
    )
    return calibrated(ctx.embedder, hits, ["vector"])  # on the store arms' scale


def ranked_memories(ctx, found, retrieved: Retrieved, unknown: list) -> list[tuple[Memory, float]]:
    """A Python arm's ranked memory ids (``found.ranked``) as its list: those read, by the store
    arms or scored for it, that pass the request's filters. Its detail counts them, and how many
    only it found."""
    now = getattr(ctx, "clock", lambda: datetime.now(UTC))()
    out = []
    for m, score in found.ranked:
        memory = retrieved.memories.get(str(m))
        if memory is not None and admitted(memory, ctx.request, now):
            out.append((memory, float(score)))
    found.detail["hits"] = len(out)
    found.detail["new_hits"] = sum(1 for m in unknown if str(m) in retrieved.memories)
    return sorted(out, key=lambda x: (-x[1], *stable_key(x[0])))


def embed(embedder, texts: list[str], hypothetical: str | None) -> list:
    """The question and its variants as queries; HyDE's hypothetical memory as a passage (it stands
    for a stored memory, so it is encoded as one)."""
    extra = [hypothetical] if hypothetical else []
    if not embedder.asymmetric:  # one batch (one API call for a remote model), as both sides agree
        return embedder.embed_queries(texts + extra)
    return embedder.embed_queries(texts) + (embedder.embed_passages(extra) if extra else [])


def calibrated(embedder, hits, arms: list[str]):
    """Cosine scores on the reference scale the fusion and the floor read (``Embedder.calibrate``:
    a no-op for MiniLM)."""
    if embedder.calibration is None:
        return hits
    for h in hits:
        for arm in arms:
            if arm in h.scores:
                h.scores[arm] = embedder.calibrate(h.scores[arm])
    return hits


def admitted(m: Memory, req, now: datetime) -> bool:
    """Whether a memory passes the request's filters: what the store arms' SQL says in ``_where``
    (store/search.py), for the memories the Python arms (graph, temporal) found by other paths."""
    if m.project != req.project or (m.expires_at is not None and m.expires_at <= now):
        return False
    if req.category is not None and m.category != req.category:
        return False
    if req.tags and not set(req.tags) <= set(m.tags):
        return False
    if req.topics and not set(req.topics) & set(m.topics or ()):
        return False
    return not (req.fact_types and m.fact_type not in req.fact_types)


def _keep_admitted(out: Retrieved, req) -> None:
    now = datetime.now(UTC)
    gone = {key for key, m in out.memories.items() if not admitted(m, req, now)}
    if not gone:
        return
    for key in gone:
        out.memories.pop(key, None)
        out.scores.pop(key, None)
    for name, hits in out.lists.items():
        out.lists[name] = [(m, s) for m, s in hits if str(m.id) not in gone]
