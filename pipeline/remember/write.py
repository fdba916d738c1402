"""The write path: what a caller gives in, stored and linked memories out, top to bottom.

| # | step | module | what it does |
|---|------|--------|--------------|
| 1 | parse | inputs.py | each item validated into a ``MemoryInput``; none written unless all are |
| 2 | secrets | secrets.py | likely secrets redacted (or refused) inside parse, ``[remember] secrets`` |
| 3 | filter | content_filter.py | a bare acknowledgement refused; ingest: low-information dropped |
| 4 | embed | providers/embedding | off the event loop, within ``embed_timeout_s``; a large batch in parts |
| 5 | novelty | here, ingest.py | each memory's nearest stored ones: ``similar`` (ingest: a duplicate) |
| 6 | topics | topics.py, topics_llm.py, facttypes.py | topics, fact type; first topic = category |
| 7 | insert and links | here, store | one transaction: the rows, their entities and graph links |
| 8 | supersede | ../supersession/marks.py | among each new memory's nearest: what it states a newer value of |
| 9 | enrich | extract.py | the ``extract`` LLM stage's entities and causes links, after the insert |

Every step takes the ``WriteContext`` (context.py) the engine builds for the call. ``remember``
runs them all for a caller's memories (step 3 for one explicit memory only: a batch is an import or
a bulk load). ``ingest`` (ingest.py) splits a conversation or a document into pieces, runs steps 1-5
itself (its novelty drops a piece that repeats a stored memory) and hands the rest to
``store_inputs`` with their vectors and neighbours (which runs step 8); it does not enrich.
``update`` runs steps 4, 6 and 7 again for new content. A batch of ``2 * PART_SIZE`` memories or more runs steps 4-7 a part at a
time in one transaction (``_remember_in_parts``): the database stores a part while the model
embeds the next. Steps 8 and 9 may fail without failing the write: the memories are stored by
then (a failed step 8 leaves them unmarked, as they were before supersession existed).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncGenerator, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from memlane.pipeline import access, telemetry
from memlane.pipeline.access import Principal
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.providers.embedding import embed_texts, embed_texts_now
from memlane.pipeline.records import Memory, Remembered
from memlane.pipeline.remember import content_filter, extract, facttypes, passages
from memlane.pipeline.remember.context import WriteContext
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.pipeline.remember.links import LinkPlan, link_plan, link_settings, relates_to
from memlane.pipeline.remember.topics import Assignment
from memlane.pipeline.store import Store, StoredRow
from memlane.pipeline.store.graph import NEIGHBOUR_EF_SEARCH
from memlane.pipeline.store.rows import WRITTEN
from memlane.pipeline.supersession import detect, marks
from memlane.pipeline.time.events import event_time

log = logging.getLogger(__name__)

NEAREST_SPLIT_MIN = 16  # vectors of one project; fewer are one statement (a round trip apiece)
# A batch of at least two parts is embedded a part at a time, each part stored while the model
# embeds the next (``_remember_in_parts``); the model's calls take up to 64 texts anyway
# (embedding.batch_size).
PART_SIZE = 64
# The batch's last part is stored after the model is done, its neighbour search and INSERT beside
# an idle core, so a last part of this many or more is split in a half and two quarters: at 1M
# memories, 256 memories a batch, the serial tail shrank by a quarter.
TAIL_SPLIT_MIN = 16

Near = tuple[tuple[UUID, float], ...]
# The written columns a ``MemoryInput`` carries (the same names; its content hash is computed from
# its content and date): all but what step 4 and step 6 add.
# Written from what the caller gave; the rest is computed here.
COMPUTED_COLUMNS = ("embedding", "topics", "event_start", "event_end")
GIVEN_COLUMNS = tuple(c.name for c in WRITTEN if c.name not in COMPUTED_COLUMNS)


async def remember_one(
    ctx: WriteContext,
    item: MemoryInput | dict[str, Any],
    *,
    principal: Principal | None = None,
    stream: str | None = None,
) -> Remembered:
    """One explicit memory (the remember tool, ``memlane remember``): refused when its whole
    content is an acknowledgement that ``filter.exclude_patterns`` names (step 3).

    Memories remembered one at a time are a sequence, as a batch is (see ``sequenced``): with a
    ``source`` and no position, the memory takes the source's next position; without a source it is
    stored with ``stream`` (the caller's client, e.g. "mcp") as its source and continues that
    stream's sequence only within ``graph.sequence_gap_s``."""
    [parsed] = parse(ctx.config, [item])
    content_filter.check_remember(parsed.content, ctx.config)
    [out] = await remember(ctx, [parsed], principal=principal, stream=stream)
    return out


async def remember(
    ctx: WriteContext,
    items: list[MemoryInput | dict[str, Any]],
    *,
    principal: Principal | None = None,
    chain: bool = True,
    stream: str | None = None,
) -> list[Remembered]:
    """Steps 1-8 for ``items``, stored in one transaction; ``principal`` must be allowed every
    item's project. ``chain``: a batch sharing a source (and giving no positions) is one
    conversation, linked in order with ``next``. ``stream``: one memory remembered on its own
    (``remember_one``) continues a sequence."""
    with telemetry.span("remember.parse", **{"memlane.count": len(items)}):
        inputs = parse(ctx.config, items)
        for m in inputs:
            access.check(principal, m.project)
    f = ctx.config.filter
    sequence = sequenced(inputs, stream, ctx.config.graph.sequence_gap_s) if stream is not None else None
    if sequence is not None:
        inputs = [m.model_copy(update={"source": sequence[0]}) for m in inputs]
    similar = (f.novelty_threshold, f.remember_similar_limit)
    if len(inputs) >= 2 * PART_SIZE and sequence is None and ctx.topics_llm is None:
        results = await _remember_in_parts(ctx, inputs, similar=similar, chain=chain)
        await enrich(ctx, results, inputs)
        return results
    # The texts go to the model first: their entities (link_plan) are read while they are embedded.
    embedding = embed_texts_now(
        ctx.embedder, [m.content for m in inputs], ctx.config.embedding.embed_timeout_s
    )
    try:
        links = link_plan(ctx.config.graph, inputs, chain=chain, embedder=ctx.embedder)
        with telemetry.span("remember.embed", **{"memlane.count": len(inputs)}):
            vectors = await embed(ctx, inputs, started=embedding)
    finally:
        embedding.cancel()
    results = await store_inputs(
        ctx,
        inputs,
        similar=similar,
        vectors=vectors,
        links=links,
        sequence=sequence,
    )
    with telemetry.span("remember.enrich", **{"memlane.count": len(results)}):
        await enrich(ctx, results, inputs)
    return results


async def _remember_in_parts(
    ctx: WriteContext, inputs: list[MemoryInput], *, similar: tuple[float, int], chain: bool
) -> list[Remembered]:
    """Steps 4-7 for a large batch, a part at a time: while the model embeds one part, the
    database searches the neighbours of the part before and inserts it, in the batch's one
    transaction (``Store.insert_chunks``), instead of waiting for the whole batch's vectors. The
    parts are the batch's texts by length (the model pads a call's texts to its longest), so the
    result is the same as ``store_inputs`` on the whole batch: the same rows, neighbours, topics and
    links, and nothing stored if any part fails."""
    timeout = ctx.config.embedding.embed_timeout_s
    order = sorted(range(len(inputs)), key=lambda i: len(inputs[i].content))
    parts = split_parts(order)
    texts = [[inputs[i].content for i in part] for part in parts]
    first = embed_texts_now(ctx.embedder, texts[0], timeout)
    try:
        links = link_plan(ctx.config.graph, inputs, chain=chain, embedder=ctx.embedder)
    except BaseException:
        first.cancel()
        raise
    # The part under way at the model (None after the last): the next is sent as one is stored.
    started: asyncio.Future[list[list[float]]] | None = first
    near: list[Near] = []
    k = max(similar[1], links.settings.relates_to_k, detect.CANDIDATES)
    final: list[MemoryInput] = list(inputs)
    vectors: list[list[float]] = [[] for _ in inputs]  # each part's, in place as it is embedded
    found: list[list[tuple[UUID, float]]] = [[] for _ in inputs]

    async def prepared() -> AsyncGenerator[tuple[list[int], list[StoredRow]], None]:
        nonlocal started, near
        try:
            for p, part in enumerate(parts):
                mine = [inputs[i] for i in part]
                vecs = await embed(ctx, mine, started=started)
                # The next part goes to the model before this one goes to the database.
                started = embed_texts_now(ctx.embedder, texts[p + 1], timeout) if p + 1 < len(parts) else None
                searched = asyncio.ensure_future(_nearest(ctx.store, mine, vecs, k)) if k > 0 else None
                try:
                    mine, assigned = await assign_topics(ctx, mine, vecs)
                    hits = await searched if searched is not None else [[] for _ in part]
                finally:
                    if searched is not None:
                        searched.cancel()
                for i, m, v, h in zip(part, mine, vecs, hits, strict=True):
                    final[i], vectors[i], found[i] = m, v, h
                later = await passages.for_inputs(ctx, [m.content for m in mine])
                yield part, stored_rows(mine, vecs, assigned, parts=later)
        finally:
            if started is not None:
                started.cancel()
        # Every part is in: the whole batch's similar reports and relates_to links, memories of
        # different parts among them (Store.insert_chunks asks the plan for its links after the
        # last part); step 5 with the neighbours already found.
        near, _ = await novelty(ctx, final, vectors, similar=similar, links=links, found=found)

    rows = prepared()
    try:
        with _topics_kept_only_if_stored(ctx, inputs):
            stored = await ctx.store.insert_chunks(
                rows,
                len(inputs),
                dict(Counter(m.project for m in inputs)),
                model_id=ctx.embedder.vector_ids,
                links=links,
            )
    finally:
        await rows.aclose()  # a store that gave up early: the next part's embedding is cancelled
    return await supersede_new(ctx, _remembered(final, stored, near), final, vectors, found)


def split_parts(order: list[int]) -> list[list[int]]:
    """A batch's positions (in the order they are embedded) cut into parts of ``PART_SIZE``, the
    last one in a half and two quarters when it has ``TAIL_SPLIT_MIN`` or more."""
    parts = [order[j : j + PART_SIZE] for j in range(0, len(order), PART_SIZE)]
    if parts and len(parts[-1]) >= max(TAIL_SPLIT_MIN, 4):  # four at least: no empty quarter
        last = parts.pop()
        half, quarter = len(last) // 2, len(last) // 4
        parts += [last[:half], last[half : half + quarter], last[half + quarter :]]
    return parts


def sequenced(inputs: list[MemoryInput], stream: str, gap_s: float) -> tuple[str, float | None] | None:
    """How one memory remembered on its own joins a sequence: (source, gap bound), or None.

    An assistant remembers a conversation one fact or turn at a time, so what a batch says by
    sharing a source (these belong together, in this order) a single call cannot. Its order and
    neighbours come from the sequence instead: a memory the caller gave a ``source`` (and no
    position) follows the source's last memory, whenever it came; one without a source is stored
    with the caller's ``stream`` as its source and follows the stream's last memory in the project
    only when the two were stored, and happened, at most ``gap_s`` apart: the memories of one
    sitting. A later sitting, or a memory dated days away from the one before it (another session
    of an imported chat), starts a new segment. ``metadata`` is never read."""
    [m] = inputs
    if m.position is not None:
        return None
    if m.source is not None:
        return m.source, None
    if gap_s <= 0:
        return None
    return stream, gap_s


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Steps 1 and 2: validate every item (and redact its secrets) before anything is embedded
    or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def store_inputs(
    ctx: WriteContext,
    inputs: list[MemoryInput],
    *,
    similar: tuple[float, int] | None = None,
    vectors: list[list[float]] | None = None,
    links: LinkPlan | None = None,
    found: list[list[tuple[UUID, float]]] | None = None,
    sequence: tuple[str, float | None] | None = None,
) -> list[Remembered]:
    """Steps 4-7: embed, find neighbours, assign topics, insert in one transaction; one result per
    input, in order. An embedder that fails or hangs stores nothing (EmbeddingFailed).
    ``vectors``: the inputs' embeddings when the caller has them already (ingest).
    ``similar`` = (threshold, limit): also report, for each new memory, up to ``limit`` memories
    already stored in its project with a cosine similarity at or above ``threshold``.
    ``links``: the memories' entities and graph links (``link_plan``), written in the same transaction.
    ``found``: each input's nearest stored memories (id, similarity), best first, when the caller
    searched already (ingest, for novelty): no search is made here. ``sequence``: (source, gap
    bound) of a memory that continues a sequence (``sequenced``)."""
    n = {"memlane.count": len(inputs)}
    if vectors is None:
        with telemetry.span("remember.embed", **n):
            vectors = await embed(ctx, inputs)
    # A long memory's passages are embedded while the database searches its neighbours.
    later = asyncio.ensure_future(passages.for_inputs(ctx, [m.content for m in inputs]))
    try:
        # The neighbour search is the database's work and topics are Python's: side by side, each
        # runs while the other waits (neither reads what the other decides).
        with telemetry.span("remember.novelty_and_topics", **n):
            searched = asyncio.ensure_future(
                novelty(ctx, inputs, vectors, similar=similar, links=links, found=found)
            )
            try:
                inputs, assigned = await assign_topics(ctx, inputs, vectors)
                near, found = await searched
            finally:
                searched.cancel()
        with telemetry.span("remember.insert", **n):
            results = await insert(
                ctx, inputs, vectors, assigned, links=links, near=near, sequence=sequence, parts=await later
            )
    finally:
        later.cancel()
    with telemetry.span("remember.supersede", **n):
        return await supersede_new(ctx, results, inputs, vectors, found)


async def embed(
    ctx: WriteContext,
    inputs: list[MemoryInput],
    started: asyncio.Future[list[list[float]]] | None = None,
) -> list[list[float]]:
    """Step 4: the inputs' embeddings, off the event loop, bounded by ``embed_timeout_s``;
    ``started``: the same already under way (``embed_texts_now``)."""
    try:
        if started is not None:
            return await started
        return await embed_texts(
            ctx.embedder, [m.content for m in inputs], ctx.config.embedding.embed_timeout_s
        )
    except EmbeddingFailed as e:
        raise EmbeddingFailed(f"{e}; nothing was stored") from e


async def novelty(
    ctx: WriteContext,
    inputs: list[MemoryInput],
    vectors: list[list[float]],
    *,
    similar: tuple[float, int] | None,
    links: LinkPlan | None,
    found: list[list[tuple[UUID, float]]] | None,
) -> tuple[list[Near], list[list[tuple[UUID, float]]]]:
    """Step 5: each input's stored memories at or above ``similar``'s threshold (none without
    ``similar``), and each input's nearest stored memories (id, similarity). One nearest-neighbour
    search per project in the batch, before the insert, serves this report, the relates_to links,
    which it puts in ``links.relates``, and step 8's candidates."""
    near: list[Near] = [()] * len(inputs)
    limit = similar[1] if similar is not None else 0
    k = max(limit, links.settings.relates_to_k if links is not None else 0, detect.CANDIDATES)
    if found is None:
        found = await _nearest(ctx.store, inputs, vectors, k) if inputs else []
    if inputs:
        if similar is not None and limit > 0:
            threshold = similar[0]
            near = [tuple((mid, round(sim, 4)) for mid, sim in h[:limit] if sim >= threshold) for h in found]
        if links is not None and links.settings.relates_to_k > 0:
            links.relates = relates_to(inputs, vectors, found, links.settings)
    return near, found


async def assign_topics(
    ctx: WriteContext, inputs: list[MemoryInput], vectors: list[list[float]]
) -> tuple[list[MemoryInput], Sequence[Assignment | None]]:
    """Step 6, when ``[topics] enabled``: topics offline (refined by the ``topics`` LLM stage when
    it serves the write) and fact types; the first topic becomes the category when the caller gave
    none. (inputs, one assignment or None per input)."""
    topics = ctx.topics
    if not topics.enabled:
        return inputs, [None] * len(inputs)
    assigned = await topics.assign_batch(ctx.store, [(m.project, m.content) for m in inputs], vectors)
    if ctx.topics_llm is not None:  # never raises: the offline assignment stands
        inputs, assigned = await ctx.topics_llm(ctx.store, inputs, vectors, assigned)
    inputs = [
        m.model_copy(
            update={
                "category": m.category or (a.topics[0] if a.topics else None),
                "fact_type": m.fact_type or facttypes.classify(m.content),
            }
        )
        for m, a in zip(inputs, assigned, strict=True)
    ]
    return inputs, assigned


async def insert(
    ctx: WriteContext,
    inputs: list[MemoryInput],
    vectors: list[list[float]],
    assigned: Sequence[Assignment | None],
    *,
    links: LinkPlan | None,
    near: list[Near],
    sequence: tuple[str, float | None] | None = None,
    parts: Sequence[passages.Passages] | None = None,
) -> list[Remembered]:
    """Step 7: the rows, with their passages (``parts``), entities and graph links, in one
    transaction."""
    rows = stored_rows(inputs, vectors, assigned, sequence, parts)
    with _topics_kept_only_if_stored(ctx, inputs):
        results = await ctx.store.insert(rows, model_id=ctx.embedder.vector_ids, links=links)
    return _remembered(inputs, results, near)


@contextmanager
def _topics_kept_only_if_stored(ctx: WriteContext, inputs: list[MemoryInput]) -> Iterator[None]:
    """Around step 7's insert: if it fails, the projects' cached topic centroids, which step 6
    moved towards this batch, are dropped (the batch was not stored)."""
    try:
        yield
    except BaseException:
        ctx.topics.forget_cache({m.project for m in inputs})
        raise


def stored_rows(
    inputs: list[MemoryInput],
    vectors: list[list[float]],
    assigned: Sequence[Assignment | None],
    sequence: tuple[str, float | None] | None = None,
    parts: Sequence[passages.Passages] | None = None,
) -> list[StoredRow]:
    """The rows step 7 writes: each input's columns as the caller gave them (checked), with its
    vector, topics, event time and passages' vectors."""
    now = datetime.now(UTC)
    parts = parts if parts is not None else [()] * len(inputs)
    return [
        StoredRow(
            values={
                **{name: getattr(m, name) for name in GIVEN_COLUMNS},
                "embedding": vec,
                "topics": a.topics if a is not None else None,
                **_event_columns(m.content, m.occurred_at or now),
            },
            auto_topics=a.auto if a is not None else (),
            sequence=sequence is not None,
            sequence_gap_s=sequence[1] if sequence is not None else None,
            passages=ps,
        )
        for m, vec, a, ps in zip(inputs, vectors, assigned, parts, strict=True)
    ]


def _event_columns(content: str, said_at: datetime) -> dict[str, datetime | None]:
    when = event_time(content, said_at)
    return {"event_start": when[0] if when else None, "event_end": when[1] if when else None}


def _remembered(
    inputs: list[MemoryInput], stored: list[tuple[UUID, bool]], near: list[Near]
) -> list[Remembered]:
    return [
        Remembered(
            id=mid,
            status="created" if created else "duplicate",
            project=m.project,
            redacted=tuple((r["kind"], r["count"]) for r in m.redacted),
            # A duplicate is the stored memory itself: nothing new to compare.
            similar=tuple(s for s in hits if s[0] != mid) if created else (),
        )
        for m, (mid, created), hits in zip(inputs, stored, near, strict=True)
    ]


async def supersede_new(
    ctx: WriteContext,
    results: list[Remembered],
    inputs: Sequence[MemoryInput] | Sequence[str],
    vectors: list[list[float]],
    found: list[list[tuple[UUID, float]]] | None = None,
) -> list[Remembered]:
    """Step 8 (``pipeline/supersession/marks.py``): each new memory against its nearest current
    memories of its project, the older of a pair that states one attribute's values marked
    superseded by the newer. A failure there keeps the memories as stored, unmarked."""
    texts = [m if isinstance(m, str) else m.content for m in inputs]
    judge = marks.Judge(ctx.supersede_llm, ctx.config.llm.max_concurrency)
    return await marks.mark_new(ctx.store, judge, results, texts, vectors, found)


async def enrich(ctx: WriteContext, results: list[Remembered], inputs: list[MemoryInput]) -> None:
    """Step 8: the extract stage's entities and causes links, when an LLM serves it (after the
    store: the LLM's additions are extra, never a failed remember)."""
    if ctx.llm is None:
        return
    created = [
        (r.id, r.project, m.content) for r, m in zip(results, inputs, strict=True) if r.status == "created"
    ]
    try:
        await extract.enrich(ctx, created)
    except Exception as e:  # noqa: BLE001
        log.warning("LLM extraction skipped: %s", type(e).__name__)


async def update(ctx: WriteContext, memory_id: UUID, fields: dict[str, Any]) -> Memory:
    """Steps 4, 6 and 7 for an update's ``fields`` (``MemoryPatch.changes``): new content is
    embedded again and gets topics and a fact type again (among the existing topics)."""
    new_passages: passages.Passages = ()
    if "content" in fields or "occurred_at" in fields:
        current = await ctx.store.get(memory_id)
        said = fields.get("occurred_at", current.occurred_at) or current.created_at
        fields.update(_event_columns(fields.get("content", current.content), said))
    if "content" in fields:
        try:
            [fields["embedding"]] = await embed_texts(
                ctx.embedder, [fields["content"]], ctx.config.embedding.embed_timeout_s
            )
            [new_passages] = await passages.embed_passages(
                ctx.embedder,
                [fields["content"]],
                ctx.config.embedding.embed_timeout_s,
                enabled=ctx.config.embedding.passages,
            )
        except EmbeddingFailed as e:
            raise EmbeddingFailed(f"{e}; the memory was not changed") from e
        if ctx.topics.enabled:
            current = await ctx.store.get(memory_id)
            fields["topics"] = await ctx.topics.reassign(
                ctx.store, current.project, fields["content"], fields["embedding"]
            )
            fields.setdefault("fact_type", facttypes.classify(fields["content"]))
    plan = LinkPlan(settings=link_settings(ctx.config.graph, ctx.embedder), entities=[])
    updated = await ctx.store.update(
        memory_id,
        fields,
        model_id=ctx.embedder.vector_ids,
        links=plan,
        passages=new_passages if "content" in fields else None,
    )
    if "embedding" in fields:
        # New content is a new statement: step 8 as for a new memory, which may mark this one.
        [judged] = await supersede_new(
            ctx,
            [Remembered(id=updated.id, status="created", project=updated.project)],
            [updated.content],
            [fields["embedding"]],
        )
        if judged.superseded_by is not None or judged.conflicts:  # its own row changed
            updated = await ctx.store.get(memory_id)
    return updated


# -- the neighbour search (step 5) -------------------------------------------------------------


async def _nearest(
    store: Store, inputs: list[MemoryInput], vectors: list[list[float]], k: int
) -> list[list[tuple[UUID, float]]]:
    """Each input's ``k`` nearest stored memories of its project: one search per project, a large
    batch of an indexed project's split in two, up to ``store.parallel_reads`` at once: each is
    one server process's work, which the batch's embedding no longer holds up."""
    found: list[list[tuple[UUID, float]]] = [[] for _ in inputs]
    by_project: dict[str, list[int]] = {}
    for i, m in enumerate(inputs):
        by_project.setdefault(m.project, []).append(i)
    parts: list[tuple[str, list[int]]] = []
    for project, idx in by_project.items():
        # An unindexed project's searches read it whole once per statement (store/maintenance.py): not split.
        halves = 2 if len(idx) >= NEAREST_SPLIT_MIN and store.known_indexed(project) else 1
        step = -(-len(idx) // halves)
        parts += [(project, idx[j : j + step]) for j in range(0, len(idx), step)]
    gate = asyncio.Semaphore(store.parallel_reads)

    async def search(project: str, idx: list[int]) -> None:
        async with gate:
            hits = await store.nearest_many(
                project, [vectors[i] for i in idx], k, ef_search=NEIGHBOUR_EF_SEARCH
            )
        for i, h in zip(idx, hits, strict=True):
            found[i] = h

    jobs = [asyncio.ensure_future(search(project, idx)) for project, idx in parts]
    try:
        await asyncio.gather(*jobs)
    finally:
        for j in jobs:
            j.cancel()
    return found
