"""The temporal retrieval arm (stage 4): when the question names a time ("last week", "in June",
"the day after the launch"), the memories whose ``occurred_at`` falls in it, or whose event time
(the time their content names, ``time/events.py``) overlaps it.

The ranges come from the intent stage (``Intent.time_ranges``, parsed by ``pipeline/time/parser.py``
relative to the recall's ``reference_time``), or from the question itself when intent analysis
left none. A range relative to an event ("the week before the launch") is anchored here: the
memory of the project that best matches the event phrase (cosine + BM25 / best BM25, at least
``[temporal] event_min_similarity`` cosine) gives its ``occurred_at``, and the trace names it;
that memory itself is not boosted (the question asks what happened around the event).

The arm reads at most ``[temporal] max_scan`` in-range memories through the (project,
occurred_at) index, scores them by their similarity to the rest of the question (cosine to the
question's embedding and BM25 of the question with the time phrases removed) and keeps the best
``[temporal] candidates``. Every candidate in a range, its own and the other arms', gets score 1.0
on this arm; fusion weighs it with ``recall.arm_weights.temporal``, so in score fusion an in-range
memory gains that much over an out-of-range one with the same cosine and BM25 (a boost, not a
filter: an out-of-range exact match can still win). Its own hits come with their exact cosine and
BM25, so fusion and the relevance floor judge them like any other candidate.

No range in the question: the arm does not run, and the retrieval stage's detail says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Protocol

from memlane.pipeline.config import EngineConfig
from memlane.pipeline.providers.embedding.base import Embedder, calibrated
from memlane.pipeline.records import Memory, Query, stable_key
from memlane.pipeline.request import Filters
from memlane.pipeline.store.search import Hit, KeywordBounds, SearchQueries
from memlane.pipeline.time.parser import TimeRange, parse, strip_expressions

ARM = "temporal"


class TemporalRequest(Protocol):
    """What the arm reads of the recall's request (``recall/query.py``'s ``RecallQuery``)."""

    @property
    def reference_time(self) -> datetime: ...

    @property
    def filters(self) -> Filters: ...


class TemporalContext(Protocol):
    """What the arm reads of the recall's context: recall passes its ``RecallContext``
    (``recall/context.py``), which this layer, below recall, may not import."""

    @property
    def config(self) -> EngineConfig: ...

    @property
    def store(self) -> SearchQueries: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def request(self) -> TemporalRequest: ...


class Found(Protocol):
    """What the arm reads and adds to of what retrieval found so far (``recall/candidates.py``'s
    ``Retrieved``)."""

    @property
    def arms(self) -> tuple[str, ...]: ...

    @property
    def memories(self) -> dict[str, Memory]: ...

    @property
    def scores(self) -> dict[str, dict[str, float]]: ...

    @property
    def vectors(self) -> list[list[float]]: ...

    @property
    def notes(self) -> dict[str, object]: ...

    def add_exact(self, memory: Memory, scores: dict[str, float]) -> None: ...


def question_ranges(ctx: TemporalContext, query: Query) -> list[TimeRange]:
    """The ranges of the question: the intent stage's, else parsed here."""
    # Read by name: the record's type (``recall/intent.py``) is a layer above this one, and
    # ``Query.intent`` names only what the stages below it read (records.py).
    given: tuple[TimeRange, ...] | None = getattr(query.intent, "time_ranges", None)
    if given is not None:
        return list(given)
    cfg = ctx.config.temporal
    return parse(query.text, ctx.request.reference_time, recent_days=cfg.recent_days)


async def _anchor(
    ctx: TemporalContext, r: TimeRange, embedding_of: Callable[[list[str]], Awaitable[list[list[float]]]]
) -> tuple[TimeRange | None, str]:
    """An event range placed on the memory that best matches its event phrase."""
    event = r.event
    assert event is not None  # a range of kind "event" names its event (parser.py)
    cfg = ctx.config
    vectors = await embedding_of([event])
    hits = await ctx.store.search(
        text=event,
        embedding=vectors[0] if vectors else None,
        filters=ctx.request.filters,
        k=cfg.temporal.candidates,
        bounds=KeywordBounds.of(cfg.recall),
    )
    hits = calibrated(ctx.embedder, hits, ["vector"])  # the floor is on the reference scale
    best_bm25 = max((h.scores.get("keyword", 0.0) for h in hits), default=0.0)

    def fused(h: Hit) -> float:
        kw = h.scores.get("keyword", 0.0)
        return h.scores.get("vector", 0.0) + (kw / best_bm25 if best_bm25 > 0 else 0.0)

    usable = [
        h
        for h in hits
        if h.memory.occurred_at is not None
        and h.scores.get("vector", 1.0) >= cfg.temporal.event_min_similarity
    ]
    if not usable:
        return None, f"no memory matches the event {event!r} closely enough"
    best = min(usable, key=lambda h: (-fused(h), *stable_key(h.memory)))
    m = best.memory
    when = m.occurred_at
    assert when is not None  # (usable: dated memories only)
    anchor = {
        "id": str(m.id),
        "occurred_at": when.isoformat(),
        "content": m.content[:80],
        "similarity": round(best.scores.get("vector", 0.0), 3),
    }
    return r.anchored(when, anchor), "anchored"


async def run(ctx: TemporalContext, query: Query, found: Found) -> list[tuple[Memory, float]]:
    """The arm (see the module docstring); notes what it did in ``found.notes[ARM]``."""
    started = time.perf_counter()
    cfg = ctx.config
    if not cfg.temporal.enabled:
        found.notes[ARM] = "not run: [temporal] enabled = false"
        return []
    ranges = question_ranges(ctx, query)
    if not ranges:
        found.notes[ARM] = "not run: no time expression in the question"
        return []

    async def embedding_of(texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(ctx.embedder.embed_queries, texts)

    resolved: list[TimeRange] = []
    unresolved: list[dict[str, Any]] = []
    for r in ranges:
        if r.resolved:
            resolved.append(r)
        elif r.kind == "event":
            placed, why = await _anchor(ctx, r, embedding_of)
            if placed is None:
                unresolved.append({**r.as_dict(), "why": why})
            else:
                resolved.append(placed)
    note: dict[str, Any] = {"ranges": [r.as_dict() for r in resolved]}
    if unresolved:
        note["unresolved"] = unresolved
    if not resolved:
        found.notes[ARM] = {**note, "status": "not run: no range could be placed"}
        return []
    rest = strip_expressions(query.text, ranges) or query.text
    embedding = found.vectors[0] if found.vectors else None
    hits, scanned = await ctx.store.in_range(
        text=rest,
        embedding=embedding,
        filters=ctx.request.filters,
        ranges=[(r.start, r.end) for r in resolved],
        k=cfg.temporal.candidates,
        max_scan=cfg.temporal.max_scan,
        bounds=KeywordBounds.of(cfg.recall),
    )
    hits = calibrated(ctx.embedder, hits, ["vector"])  # on the scale of the other arms' cosines
    # The memory an event range was anchored on is the event itself, not what happened around it:
    # it is not boosted (the other arms still find it).
    anchors = {r.anchor["id"] for r in resolved if r.anchor}
    hits = [h for h in hits if str(h.memory.id) not in anchors]
    own = {str(h.memory.id) for h in hits}
    for h in hits:  # exact scores on the active arms for memories the other arms did not find
        found.add_exact(h.memory, {a: s for a, s in h.scores.items() if a in found.arms})
    boosted = [
        m
        for key, m in found.memories.items()
        if key not in own and key not in anchors and any(m.happened_in(r.start, r.end) for r in resolved)
    ]

    def similarity(m: Memory) -> float:
        s = found.scores.get(str(m.id), {})
        return s.get("vector", 0.0) + s.get("keyword", 0.0) / max(1e-9, _best(found, "keyword"))

    ranked = sorted([h.memory for h in hits] + boosted, key=lambda m: (-similarity(m), *stable_key(m)))
    found.notes[ARM] = {
        **note,
        "question_rest": rest,
        "scanned": scanned,
        "own_hits": len(hits),
        "boosted_other_arms": len(boosted),
        "ms": round((time.perf_counter() - started) * 1000, 3),
    }
    return [(m, 1.0) for m in ranked]


def _best(found: Found, arm: str) -> float:
    return max((s.get(arm, 0.0) for s in found.scores.values()), default=0.0)
