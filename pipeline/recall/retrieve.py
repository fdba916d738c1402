"""Stage 4, retrieval: every registered arm (``pipeline/recall/arms.py``) for the question and every
synthesised variant, plus HyDE's hypothetical memory on the arms that need an embedding.

The question and variants are embedded as queries, the hypothetical memory as memories are; an
embedder whose cosines are not on the reference scale has them calibrated here (``Embedder.calibrate``), so every
later stage (fusion, the relevance floor, the trace) reads one scale whatever the model.

Each store arm that needs no embedding (keyword) finds its top k alone, on its own connection,
while the texts are embedded. If it is still running when the embedding is done, the arms that need
the embedding start alone too, so the slowest sets the pace instead of their sum; otherwise they
select their top k inside the statement that scores the union. Either way one SQL statement per
query text scores the union on every arm. The per-text statements run concurrently, bounded by
``Store.parallel_reads``. Python arms (graph, temporal) run last, with the store arms' hits as
entry points; what they read from the question alone (``Arm.prepare``) starts with the embedding.
An arm that expands from entry points (``Arm.from_entry_points``: the graph) starts from the
keyword arm's hits as soon as they are in, beside the embedding (from the store arms' fused best
hits after them when the keyword arm found nothing); its hits the store arms did not return are
scored on every store arm by a statement of their own (``candidates.score_ids``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from uuid import UUID

from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.providers.embedding import embed_texts
from memlane.pipeline.providers.embedding.base import Embedder, calibrated
from memlane.pipeline.recall import instructions
from memlane.pipeline.recall.arms import REGISTRY, Arm, Expander, resolve
from memlane.pipeline.recall.candidates import Expanded, Prepared, Retrieved, ranked_memories, score_ids
from memlane.pipeline.recall.context import RecallContext, Vector
from memlane.pipeline.recall.fuse import score_fusion
from memlane.pipeline.recall.stage import Step, cancel_all
from memlane.pipeline.records import Memory, Query
from memlane.pipeline.request import Filters
from memlane.pipeline.store.search import Hit, KeywordBounds, QueryTerms

log = logging.getLogger(__name__)

HITS_EXPLAINED = 50  # per arm list, in an explained recall's trace (detail.hits)

# A store arm's top k alone (``Store.candidates``): ids, scores (the keyword arm's), QueryTerms.
ArmTop = tuple[list[UUID], list[float] | None, QueryTerms | None]


async def retrieve(ctx: RecallContext, query: Query) -> Step[Retrieved]:
    active = resolve(ctx.request.ablation.arms)
    # The Python arms' reads that need only the question start now, beside the embedding.
    prepared: dict[str, asyncio.Future[Prepared]] = {
        a.name: asyncio.ensure_future(a.prepare(ctx, query)) for a in active if a.prepare
    }
    try:
        return await _retrieve(ctx, query, active, prepared)
    finally:
        cancel_all(prepared.values())


async def _retrieve(
    ctx: RecallContext,
    query: Query,
    active: Sequence[Arm],
    prepared: dict[str, asyncio.Future[Prepared]],
) -> Step[Retrieved]:
    req, cfg = ctx.request, ctx.config.recall
    store_arms = tuple(a.name for a in active if a.in_store)
    texts = [query.text, *query.variants]
    wants_embedding = any("embedding" in a.needs for a in active)
    to_embed = texts + ([query.hypothetical] if query.hypothetical else [])
    filters, k, bounds = req.filters, cfg.per_arm(req.limit), KeywordBounds.of(cfg)
    early = [a.name for a in active if a.in_store and "embedding" not in a.needs]
    degraded: str | None = None
    preselected: list[dict[str, list[UUID]]] = [{} for _ in texts]
    # Per text: its QueryTerms, read by the keyword arm's statement.
    terms: list[QueryTerms | None] = [None for _ in texts]
    vectors: list[Vector] = []
    # Python arm -> its run from the text-only arms' hits (None: they found nothing to start from).
    starts: dict[str, asyncio.Future[Expanded | None]] = {}
    if wants_embedding:
        tasks: dict[tuple[int, str], asyncio.Future[ArmTop]] = {
            (i, name): asyncio.ensure_future(
                ctx.store.candidates(name, text=t, filters=filters, k=k, bounds=bounds)
            )
            for i, t in enumerate(texts)
            for name in early
        }
        if tasks:
            starts = {
                a.name: asyncio.ensure_future(
                    _start_early(a.name, a.expand, ctx, query, dict(tasks), prepared)
                )
                for a in active
                if a.expand is not None  # (from_entry_points)
            }
        try:
            try:
                question = ctx.reads.question
                if question is not None and to_embed == [req.query]:
                    # Started with the recall (run.py); shielded: recalls across projects
                    # share it, and one cancelled must not cancel it for the others.
                    vectors = await asyncio.shield(question)
                else:
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
                ctx.question_vector = vectors[0]  # stage 8's category match reuses it
                instructions.read_ahead(ctx)  # stage 8's read, while the arms search
                # The arms that needed the embedding start now if the others are still running;
                # otherwise each text's one scoring statement selects their candidates itself (one
                # round trip less, usually: the keyword arm is done before the embedding is).
                if not all(t.done() for t in tasks.values()):
                    late = [a.name for a in active if a.in_store and "embedding" in a.needs]
                    for i, t in enumerate(texts):
                        for name in late:
                            tasks[(i, name)] = asyncio.ensure_future(
                                ctx.store.candidates(
                                    name, text=t, filters=filters, k=k, bounds=bounds, embedding=vectors[i]
                                )
                            )
            # Usually all done by now: their results are read without a gather (which would let
            # every other ready step run before the union's statement is sent).
            if all(t.done() for t in tasks.values()):
                results = [t.result() for t in tasks.values()]
            else:
                results = await asyncio.gather(*tasks.values())
            for (i, name), (ids, _, found_terms) in zip(tasks, results, strict=True):
                preselected[i][name] = ids
                if found_terms is not None:
                    terms[i] = found_terms
        except BaseException:
            cancel_all(starts.values())
            raise
        finally:
            for task in tasks.values():
                task.cancel()

    # The per-text statements at once, as the pool allows: with up to 4 texts (question, 2-3
    # variants) and HyDE, two already give most of what running them side by side can.
    limit = asyncio.Semaphore(ctx.store.parallel_reads)

    cosine_arms = [a.name for a in active if a.in_store and a.needs == {"embedding"}]

    async def search(
        text: str,
        embedding: list[float] | None,
        selected: tuple[str, ...],
        pre: dict[str, list[UUID]],
        read_terms: QueryTerms | None = None,
    ) -> list[Hit]:
        async with limit:
            hits = await ctx.store.search(
                text=text,
                embedding=embedding,
                filters=filters,
                k=k,
                bounds=bounds,
                arms=selected,
                preselected=pre,
                terms=read_terms,
            )
        return calibrated(ctx.embedder, hits, cosine_arms)

    # The early arms' hits the text-only arms did not return are scored beside the per-text
    # statements (on another connection), as soon as both the embedding and those hits are there.
    # (Scoring them in the question's statement instead, when the arm is done before the
    # embedding: no faster at 100,000 memories, p50 paired.)
    known = {m for pre in preselected for ids in pre.values() for m in ids}
    names = [n for n in starts if REGISTRY[n] in active]
    jobs = [
        (
            ("" if i == 0 else f":{i}"),
            search(t, vectors[i] if vectors else None, store_arms, preselected[i], terms[i]),
        )
        for i, t in enumerate(texts)
    ]
    if query.hypothetical and vectors:
        embedding_arms = tuple(n for n in store_arms if REGISTRY[n].needs == {"embedding"})
        if embedding_arms:
            jobs.append((":hyde", search("", vectors[-1], embedding_arms, {})))
    out = Retrieved(
        arms=tuple(a.name for a in active),
        vectors=list(vectors),
        embedding=vectors[0] if vectors else None,
        terms=terms[0],
        prepared=prepared,
    )
    # The per-text statements are sent first: the question's is the longest on the recall's path
    # (a gather's arguments are evaluated first, so a gather inside it would start before them).
    searches = [asyncio.ensure_future(job) for _, job in jobs]
    try:
        found, started = await asyncio.gather(
            asyncio.gather(*searches),
            asyncio.gather(
                *(_score_early(ctx, query, starts[n], known, out.embedding, terms[0]) for n in names)
            ),
        )
    finally:
        cancel_all(starts.values())
        cancel_all(searches)
    for (suffix, _), hits in zip(jobs, found, strict=True):
        out.add(suffix, hits)
    by_store = set(out.memories)  # what the store arms returned (the early arms' own hits come next)
    ran_early: set[str] = set()
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
        if arm.in_store or arm.name in ran_early:
            continue
        if arm.expand is not None:  # (from_entry_points)
            out.add_list(arm.name, await _expand_from_fused(arm.name, arm.expand, ctx, query, out))
        elif arm.run is not None:  # (not in the store: it runs or expands)
            out.add_list(arm.name, await arm.run(ctx, query, out))
    _keep_admitted(out, req.filters, ctx.clock())
    detail = {"arms": {name: len(hits) for name, hits in out.lists.items()}, **out.notes, **out.details}
    if out.terms is not None:  # the keyword arm's bound (store/search.py), for the question's text
        detail["keyword"] = {
            "postings": out.terms.postings,
            "max_postings": cfg.keyword_max_postings,
            "terms_capped": out.terms.capped,
        }
    if req.explain:  # each arm's own ranked list, for the recall explorer (ids: the trace is JSON)
        detail["hits"] = {
            name: [[str(m.id), round(score, 4)] for m, score in hits[:HITS_EXPLAINED]]
            for name, hits in out.lists.items()
        }
    if vectors and ctx.embedder.calibration is not None:
        detail["calibration"] = {"model": ctx.embedder.model_id, **ctx.embedder.calibration}
    if degraded is not None:
        return Step(
            out, status=f"degraded: {degraded}; answered by {', '.join(store_arms)} only", detail=detail
        )
    return Step(out, detail=detail)


async def _start_early(
    name: str,
    expand: Expander,
    ctx: RecallContext,
    query: Query,
    tasks: dict[tuple[int, str], asyncio.Future[ArmTop]],
    prepared: dict[str, asyncio.Future[Prepared]],
) -> Expanded | None:
    """A Python arm's run (``expand``) from the text-only store arms' hits (each memory's best score
    over the query texts, each text's scores divided by its best), started as soon as those are in;
    None when they found nothing (the arm then runs after every store arm, from their fused hits)."""
    seeds: dict[UUID, float] = {}
    for ids, scores, _ in await asyncio.gather(*tasks.values()):
        best = max(scores or (), default=0.0)
        if not scores or best <= 0:
            continue
        for m, score in zip(ids, scores, strict=True):
            seeds[m] = max(seeds.get(m, 0.0), score / best)
    if not seeds:
        return None
    return await expand(ctx, query, seeds, prepared.get(name), "keyword")


async def _score_early(
    ctx: RecallContext,
    query: Query,
    start: asyncio.Future[Expanded | None],
    known: set[UUID],
    embedding: Vector | None,
    terms: QueryTerms | None,
) -> tuple[Expanded, list[Hit]] | None:
    """An early arm's result, with the store arms' exact scores of its hits they did not return."""
    expansion = await start
    if expansion is None:
        return None
    unknown = [m for m, _ in expansion.ranked if m not in known]
    return expansion, await score_ids(ctx, query, expansion, unknown, embedding, terms)


async def _expand_from_fused(
    name: str, expand: Expander, ctx: RecallContext, query: Query, retrieved: Retrieved
) -> list[tuple[Memory, float]]:
    """An arm that expands from entry points (``expand``), run after the store arms (their text-only
    arms found nothing to start it from earlier), from their fused best hits; its hits they did not
    return are scored on them, and its list is made of what passes the request's filters."""
    found = await expand(
        ctx, query, _entry_points(ctx, retrieved, name), retrieved.prepared.get(name), "fused"
    )
    retrieved.details[name] = found.detail
    unknown = [m for m, _ in found.ranked if str(m) not in retrieved.memories]
    retrieved.add_scores(await score_ids(ctx, query, found, unknown, retrieved.embedding, retrieved.terms))
    return ranked_memories(ctx, found, retrieved, unknown)


def _entry_points(ctx: RecallContext, retrieved: Retrieved, arm: str) -> dict[UUID, float]:
    """The top fused hits of the store arms, activation = fused score / best fused score."""
    if not retrieved.scores:
        return {}
    weights = {a: w for a, w in ctx.config.recall.arm_weights.items() if a != arm}
    fused = score_fusion(retrieved, weights)[: ctx.config.graph.entry_points]
    best = max((c.score for c in fused), default=0.0)
    if best <= 0:
        return {}
    return {c.memory.id: max(c.score / best, 0.0) for c in fused}


def embed(embedder: Embedder, texts: list[str], hypothetical: str | None) -> list[Vector]:
    """The question and its variants as queries; HyDE's hypothetical memory as memories are (it
    stands for a stored memory, so it is encoded as one)."""
    extra = [hypothetical] if hypothetical else []
    if not embedder.asymmetric:  # one batch (one API call for a remote model), as both sides agree
        return embedder.embed_queries(texts + extra)
    return embedder.embed_queries(texts) + (embedder.embed_memories(extra) if extra else [])


def _keep_admitted(out: Retrieved, filters: Filters, now: datetime) -> None:
    gone = {key for key, m in out.memories.items() if not filters.admits(m, now)}
    if not gone:
        return
    for key in gone:
        out.memories.pop(key, None)
        out.scores.pop(key, None)
    for name, hits in out.lists.items():
        out.lists[name] = [(m, s) for m, s in hits if str(m.id) not in gone]
