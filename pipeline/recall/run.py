"""The recall pipeline: nine stages, top to bottom. Each is timed into the trace.

| # | stage | module | offline behaviour |
|---|-------|--------|-------------------|
| 1 | intent analysis | intent.py | offline analyser (question words, names and terms, time expressions, length) |
| 2 | query synthesis | synthesize.py | skipped: the question is the only query |
| 3 | HyDE | hyde.py | skipped: the question's embedding is used |
| 4 | retrieval | retrieve.py (arms.py, candidates.py) | vector (cosine) and keyword (BM25) arms, the graph arm (MPFP, ``graph/arm.py``), and the temporal arm when the question names a time (``time/arm.py``) |
| 5 | fusion | fuse.py | weighted score fusion (``recall.fusion = "score"``), or RRF (``rrf``, ``rrf_vector``) |
| 6 | rerank | rerank.py | skipped (or a local cross-encoder): fused order kept |
| 7 | relevance threshold | threshold.py | kept on cosine, or an informative shared word and some cosine, or in the question's time range with a shared word (any, for a question that is only a time); a turn next to a kept one that the graph reached; then a relative floor; else dropped; for a question that is only a time, its range first |
| 8 | scoring adjustments | adjust.py, then the steps in ``STAGE8_STEPS``: current.py, echoes.py, coverage.py, instructions.py | priority, pinned and category factors, project factors across projects (decay: off by default); then what is current first: a person's own facts, a newer statement of one fact and a superseded memory's successor above the older, unless the question is about the past; then a user's statement above the assistant's reply that echoes it; then an overview or order question's first answers spread over the days (time order for an order); then the standing instructions and preferences that apply, after the first answers |
| 9 | token-budgeted assembly | assemble.py | best memories whose rendered result fits max_tokens, at most limit |

Every stage follows one contract (``pipeline/recall/stage.py``): it gets the ``RecallContext`` and its
input, returns its output, and ``run_stage`` records time, counts, status (``ran``, ``skipped: why``,
``degraded: why``) and prompt. Stages given a fallback are optional: if they fail, the recall goes on
with their input and the trace says ``degraded``. Stage 8's reorderings are registered steps
(``STAGE8_STEPS``, run by ``run_steps``) under the same contract, each switched by ``[recall.steps]``
and degrading alone. Stages 1-3 run concurrently (one LLM round trip);
intent analysis routes simple questions down the fast path (``recall(mode=...)``). A whole-recall
deadline (``recall.deadline_ms``) bounds every LLM wait: past it, the stages still to run degrade and
recall answers with what it has.

A recall across projects (``RecallQuery.searched_projects``) runs stage 4 once per project (concurrently,
at most ``recall.adjust.max_parallel_projects`` at a time), so every arm and its statistics stay
single-project, merges the arms' lists, and runs stages 5-9 once on the merged candidates; the
trace shows retrieval once, with per-project details.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.providers.embedding import embed_texts_now
from memlane.pipeline.recall import (
    adjust,
    assemble,
    coverage,
    current,
    echoes,
    fuse,
    hyde,
    instructions,
    intent,
    rerank,
    retrieve,
    synthesize,
    threshold,
)
from memlane.pipeline.recall.arms import resolve
from memlane.pipeline.recall.candidates import Retrieved
from memlane.pipeline.recall.context import CentroidsRead, RecallContext
from memlane.pipeline.recall.stage import Step, SubStep, run_stage, run_steps, stage_llm
from memlane.pipeline.records import Candidate, Query, Recalled, StageTrace, Trace, stable_key

log = logging.getLogger(__name__)

UNDERSTANDING = ("intent", "synthesis", "hyde")


def _texts(q: Query) -> int:
    return 1 + len(q.variants) + (1 if q.hypothetical else 0)


def _threshold(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    return Step(threshold.apply_floor(candidates, ctx.config.recall, query=ctx.request.query))


# Stage 8's steps after its factors, in the order they run: each reorders what the one before gave,
# under the stage contract (``run_steps``), switched by its ``[recall.steps]`` setting. A new step is
# a module with ``fn(ctx, candidates) -> Step`` and one line here, with its switch in
# ``RecallSteps`` (pipeline/config/recall.py).
STAGE8_STEPS: tuple[SubStep[RecallContext, list[Candidate]], ...] = (
    SubStep("current", current.current_first, switch="current_first"),
    SubStep("echoes", echoes.statements_first, switch="echoes"),
    SubStep("coverage", coverage.spread, switch="coverage"),
    # It can bring memories in, so it runs on no candidates too.
    SubStep("instructions", instructions.apply, switch="instructions", on_empty=True),
)


async def _adjustments(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    """Stage 8: the scoring factors (adjust.py), then ``STAGE8_STEPS``, each traced as the stage's
    detail of its name."""
    step = await adjust.adjust(ctx, candidates)
    if not ctx.request.ablation.adjustments:
        return step
    switches = ctx.config.recall.steps
    return await run_steps(
        ctx, "adjustments", STAGE8_STEPS, step, switches=switches, section="[recall.steps]"
    )


async def _assemble(ctx: RecallContext, candidates: list[Candidate]) -> Step[assemble.Packed]:
    req = ctx.request
    extras = None
    if req.include_context or req.include_entities or req.include_history:
        # For the candidates that may be taken (a long one may be skipped, so twice the limit).
        ids = [c.memory.id for c in candidates[: 2 * req.limit]]
        g = ctx.config.graph
        extras = assemble.Extras(
            context=await ctx.store.context_of(ids) if req.include_context else None,
            entities=await ctx.store.entity_facts(
                ids[: req.limit], max_entities=5, per_entity=3, max_degree=g.max_entity_degree
            )
            if req.include_entities
            else None,
            history=await ctx.store.history_of(ids) if req.include_history else None,
        )
    packed = await assemble.assemble(
        candidates,
        limit=req.limit,
        max_tokens=req.max_tokens,
        explain=req.explain,
        handles=ctx.reads.handles or ctx.store.handles,
        show_project=req.spans_projects,
        extras=extras,
    )
    return Step(packed)


async def _retrieve(ctx: RecallContext, query: Query) -> Retrieved:
    return await run_stage(
        ctx, "retrieval", retrieve.retrieve, query, count_in=_texts(query), count=lambda f: len(f.scores)
    )


def _merge_traces(ctx: RecallContext, per_project: dict[str, Trace]) -> None:
    """One trace entry per stage for the per-project runs: the slowest project's time (they run
    concurrently), counts summed, the first status that is not "ran", and each project's details."""
    names: list[str] = []
    for trace in per_project.values():
        names += [st.stage for st in trace.stages if st.stage not in names]
    for name in names:
        runs = {p: st for p, t in per_project.items() for st in t.stages if st.stage == name}
        detail: dict[str, Any] = {"projects": {}}
        arms: dict[str, int] = {}
        for p, st in runs.items():
            detail["projects"][p] = {
                "ms": round(st.ms, 3),
                "in": st.count_in,
                "out": st.count_out,
                "status": st.status,
            }
            for arm, n in st.detail.get("arms", {}).items():
                arms[arm] = arms.get(arm, 0) + n
        if arms:
            detail["arms"] = arms
        ctx.trace.stages.append(
            StageTrace(
                stage=name,
                ms=max(st.ms for st in runs.values()),
                count_in=sum(st.count_in for st in runs.values()),
                count_out=sum(st.count_out for st in runs.values()),
                status=next((st.status for st in runs.values() if st.status != "ran"), "ran"),
                detail=detail,
            )
        )


async def _across_projects(ctx: RecallContext, query: Query) -> Retrieved:
    """Stage 4 per project, concurrently (bounded), merged into one ``Retrieved``: each arm's lists
    joined and re-sorted by score, so fusion normalises every arm over all the projects (a
    project's best keyword match is not 1.0 just because it is that project's best)."""
    req = ctx.request
    gate = asyncio.Semaphore(ctx.config.recall.adjust.max_parallel_projects)
    subs = {p: replace(ctx, request=req.of_project(p), trace=Trace()) for p in req.searched_projects}

    async def one(sub: RecallContext) -> Retrieved:
        async with gate:
            return await _retrieve(sub, query)

    try:
        found = await asyncio.gather(*(one(sub) for sub in subs.values()))
    finally:
        _merge_traces(ctx, {p: sub.trace for p, sub in subs.items() if sub.trace.stages})
    ctx.question_vector = next(
        (s.question_vector for s in subs.values() if s.question_vector is not None), None
    )
    merged = Retrieved(arms=found[0].arms)
    for f in found:
        for name, hits in f.lists.items():
            merged.lists.setdefault(name, []).extend(hits)
        merged.scores.update(f.scores)
        merged.memories.update(f.memories)
        merged.handle8_unique |= f.handle8_unique
        merged.category_versions.update(f.category_versions)
    for hits in merged.lists.values():
        hits.sort(key=lambda h: (-h[1], *stable_key(h[0])))
    return merged


async def _understand(ctx: RecallContext, query: Query) -> tuple[Query, bool]:
    """Stages 1-3 at once: one LLM round trip before retrieval, not three. Synthesis and HyDE
    start with intent analysis; when the route turns out to be the fast path (``mode="fast"``, or
    ``auto`` and a simple question) they are cancelled and marked skipped. Returns the query and
    whether the fast path was taken."""
    mode = ctx.request.mode
    route: asyncio.Future[tuple[bool, str]] = asyncio.get_running_loop().create_future()
    if mode != "auto":
        route.set_result((mode == "fast", f"mode={mode}"))

    async def analyse(c: RecallContext, q: Query) -> Step[Query]:
        step = await intent.analyse(c, q)
        if not route.done() and c.usage.deferred:  # the client's model answers next round: ask all three now
            route.set_result((False, "waiting for the client's model"))
        if not route.done():
            record = step.value.intent
            assert record is not None  # analysis always records an intent (the offline one at least)
            complexity = record.complexity
            route.set_result((complexity == "simple", f"{record.source} intent: {complexity}"))
        return step

    def gated(
        name: str, fn: Callable[[RecallContext, Query], Awaitable[Step[Query]]]
    ) -> Callable[[RecallContext, Query], Awaitable[Step[Query]]]:
        async def run(c: RecallContext, q: Query) -> Step[Query]:
            if stage_llm(c, name)[0] is None:  # nothing to route: the stage says why it cannot run
                return await fn(c, q)
            if route.done() and route.result()[0]:
                return Step(q, status=f"skipped: fast path ({route.result()[1]})")
            work = asyncio.ensure_future(fn(c, q))
            try:
                fast, why = await asyncio.shield(route)
            except BaseException:
                work.cancel()
                raise
            if fast:
                work.cancel()
                return Step(q, status=f"skipped: fast path ({why})")
            return await work

        return run

    def ensure_route(q: Query) -> None:  # intent degraded before deciding: the offline record decides
        if not route.done():
            simple = intent.analyse_offline(q.text).complexity == "simple"
            route.set_result((simple, "offline intent: " + ("simple" if simple else "not simple")))

    async def intent_stage() -> Query:
        try:
            return await run_stage(ctx, "intent", analyse, query, count=_texts, fallback=query)
        finally:
            ensure_route(query)

    understood, synthesised, hypothesised = await asyncio.gather(
        intent_stage(),
        run_stage(
            ctx, "synthesis", gated("synthesis", synthesize.synthesize), query, count=_texts, fallback=query
        ),
        run_stage(ctx, "hyde", gated("hyde", hyde.hypothesise), query, count=_texts, fallback=query),
    )
    # The trace lists the three in pipeline order, whatever order they finished in.
    first = len(ctx.trace.stages) - 3
    ctx.trace.stages[first:] = sorted(ctx.trace.stages[first:], key=lambda st: UNDERSTANDING.index(st.stage))
    fast, why = route.result()
    ctx.trace.route = f"{'fast' if fast else 'full'} ({why})"
    merged = replace(
        query,
        intent=understood.intent,
        variants=synthesised.variants,
        hypothetical=hypothesised.hypothetical,
    )
    return merged, fast


async def recall(ctx: RecallContext) -> Recalled:
    started = time.monotonic()
    ctx.deadline = started + ctx.config.recall.deadline_ms / 1000
    ctx.reads.question = _embed_question_now(ctx)
    try:
        return await _stages(ctx)
    finally:
        ctx.trace.wall_ms = (time.monotonic() - started) * 1000
        ctx.reads.cancel()


def _embed_question_now(ctx: RecallContext) -> asyncio.Future[list[list[float]]] | None:
    """The question's embedding, started before stage 1 when retrieval will embed the question
    alone (no LLM can add a variant or a hypothetical memory): stages 1-3 and retrieval's first reads then
    run beside it instead of before it. None otherwise; retrieval embeds its texts itself."""
    try:
        wanted = any("embedding" in arm.needs for arm in resolve(ctx.request.ablation.arms))
    except InvalidInput:
        return None  # (retrieval reports the unknown arm)
    if not wanted or any(stage_llm(ctx, name)[0] is not None for name in ("synthesis", "hyde")):
        return None
    return embed_texts_now(
        ctx.embedder,
        [ctx.request.query],
        ctx.config.embedding.embed_timeout_s,
        encode=lambda texts: retrieve.embed(ctx.embedder, texts, None),
    )


async def _stages(ctx: RecallContext) -> Recalled:
    req, cfg = ctx.request, ctx.config.recall
    query, ctx.fast_path = await _understand(ctx, Query(text=req.query))
    if ctx.usage.deferred:
        # MCP sampling on a 2026-07-28 connection: the caller asks the client and calls again;
        # retrieving now with a query the next round will change would be wasted.
        ctx.trace.route = "deferred: waiting for the client's model"
        return Recalled(memories=[], ranked=[], tokens_used=0, trace=ctx.trace, deferred=True)
    found = await (_across_projects(ctx, query) if req.spans_projects else _retrieve(ctx, query))
    # Stage 8 reads the candidates' access statistics. The arms read them with the memories; any
    # memory read without them has them read now, while stages 5-7 run (off the path).
    unread = [m.id for m in found.memories.values() if not m.access_known]
    active = adjust.active_factors(cfg.decay, cfg.adjust, spans_projects=req.spans_projects)
    adjusting = req.ablation.adjustments
    if unread and adjusting and adjust.reads_access(cfg.adjust, active):
        ctx.reads.access = asyncio.ensure_future(ctx.store.access_stats(unread))
    # Likewise the centroids of the retrieved memories' categories (a superset of the candidates'),
    # for stage 8's offline category match: its check of their versions is a round trip.
    if adjusting and adjust.reads_centroids(ctx, active):
        pairs = sorted({(m.project, m.category) for m in found.memories.values() if m.category})
        if pairs:
            ctx.reads.centroids = CentroidsRead(
                frozenset(pairs),
                asyncio.ensure_future(
                    ctx.store.category_centroids(
                        pairs, max_age_s=cfg.adjust.category_cache_s, versions=found.category_versions
                    )
                ),
            )
    if ctx.reads.access is not None or ctx.reads.centroids is not None:
        # Stages 5-7 run without waiting on anything: the reads are sent now, or only in stage 8.
        await asyncio.sleep(0)
    return await _rank_and_pack(ctx, found)


BEFORE_THRESHOLD_KEPT = 50


async def _rank_and_pack(ctx: RecallContext, found: Retrieved) -> Recalled:
    """Stages 5-9."""
    req, cfg = ctx.request, ctx.config.recall
    candidates = await run_stage(ctx, "fusion", fuse.fuse, found, count_in=len(found.scores))
    candidates = await run_stage(ctx, "rerank", rerank.rerank, candidates, fallback=candidates)
    floor = {
        "min_similarity": cfg.min_similarity,
        "semantic_min_similarity": cfg.semantic_min_similarity,
        "word_min_similarity": cfg.word_min_similarity,
        "relative_floor": cfg.relative_floor,
    }
    before_threshold = tuple(c.memory.id for c in candidates[:BEFORE_THRESHOLD_KEPT])
    candidates = await run_stage(ctx, "threshold", _threshold, candidates, detail=floor)
    if not req.explain:  # (an explained result shows whole ids)
        # The handles of the memories stage 9 will likely take (stage 8 reorders a little) are read
        # while stage 8 runs, but for those retrieval found unique in 8 digits (usually all).
        ctx.reads.handles = assemble.HandlesReadAhead(
            ctx.store.handles, [c.memory.id for c in candidates[: 2 * req.limit]], found.handle8_unique
        )
        if ctx.reads.handles.reading:
            await asyncio.sleep(0)  # sent now: stage 8 may not wait on anything before stage 9
    candidates = await run_stage(ctx, "adjustments", _adjustments, candidates, fallback=candidates)
    packed = await run_stage(
        ctx,
        "assembly",
        _assemble,
        candidates,
        count_in=len(candidates),
        count=lambda packed: len(packed.chosen),
        detail={"max_tokens": req.max_tokens, "limit": req.limit},
    )
    chosen, tokens = packed.chosen, packed.tokens_used
    ctx.trace.stages[-1].detail["tokens_used"] = tokens
    if ctx.usage.calls or ctx.usage.cached:
        ctx.trace.llm = ctx.usage.as_dict()
    return Recalled(
        memories=[(c.memory, c.score) for c in chosen],
        ranked=candidates,
        tokens_used=tokens,
        trace=ctx.trace,
        deferred=ctx.usage.deferred > 0,
        rendered=packed.rendered,
        before_threshold=before_threshold,
    )
