"""``memlane maintain``: upkeep of a store, one registered task at a time.

Every task is idempotent and resumable (it works in its own short transactions, so an interrupted
run loses at most its current batch and the next run continues), reports progress, and is safe while
servers run. Only one ``maintain`` runs per database at a time (an advisory lock); a second one is
refused with a clear message instead of waiting.

Adding a task is one function plus one line in ``TASKS``: ``run(ctx)`` does the work with
``ctx.write`` (the write path's context: store, configuration, models) or, with ``ctx.dry_run``,
only counts what it would do, and returns a summary dict for the report.

``reembed`` (``memlane reembed``) is upkeep too, but no task: it moves the store to another
embedding model, so it runs when the model changes, not on a schedule.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from memlane.pipeline import validate as v
from memlane.pipeline.entities import extract
from memlane.pipeline.errors import InvalidInput, StoreError
from memlane.pipeline.records import Memory
from memlane.pipeline.remember import facttypes, passages, summaries
from memlane.pipeline.remember.context import WriteContext
from memlane.pipeline.remember.links import link_settings
from memlane.pipeline.store.graph import LinkItem
from memlane.pipeline.store.topics import add_to_sums
from memlane.pipeline.time.events import event_time


class WritesThrough(Protocol):
    """What ``maintain`` needs of its caller (the Engine): a write context for the tasks."""

    def write_context(self) -> WriteContext: ...


# pg_try_advisory_lock key of a running ``memlane maintain`` (the migration lock is another key).
MAINTAIN_LOCK_KEY = 0x6D6C6D61  # "mlma"


@dataclass(slots=True)
class TaskContext:
    write: WriteContext
    dry_run: bool = False
    # progress(task, done, total or None): called as work is done; total None when unknown.
    progress: Callable[[str, int, int | None], None] | None = None
    task: str = ""

    def report(self, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(self.task, done, total)


TaskRunner = Callable[[TaskContext], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    description: str
    run: TaskRunner


@dataclass(slots=True)
class TaskReport:
    task: str
    ms: float
    summary: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "ms": round(self.ms, 1), **self.summary}


async def _analyse(ctx: TaskContext) -> dict[str, Any]:
    """Refresh the planner's statistics and reclaim dead rows (VACUUM takes no lock that blocks
    reads or writes)."""
    store = ctx.write.store
    tables = await store.maintenance_tables()
    if ctx.dry_run:
        return {"would_vacuum": tables}
    for i, table in enumerate(tables, 1):
        await store.vacuum_analyse(table)
        ctx.report(i, len(tables))
    return {"vacuumed": tables}


PURGE_BATCH = 1000
MERGE_BATCH = 200  # memories probed per statement (each with its nearest neighbours)
MERGE_NEIGHBOURS = 8
MERGE_CURSOR = "maintain.merge.cursor"  # memlane_settings key: where an interrupted merge resumes
PROVENANCE_CHARS = 500


async def _purge(ctx: TaskContext) -> dict[str, Any]:
    """Delete memories past their ``expires_at`` (recall already ignores them), in batches."""
    store = ctx.write.store
    total = await store.count_expired()
    if ctx.dry_run:
        return {"would_purge": total}
    purged = 0
    while True:
        n = await store.purge_expired(PURGE_BATCH)
        purged += n
        ctx.report(purged, max(total, purged))
        if n < PURGE_BATCH:
            break
    return {"purged": purged}


def _provenance(rows: list[Memory]) -> list[dict[str, Any]]:
    """What ``metadata.merged_from`` keeps of each merged-away memory (and of what it had absorbed)."""
    out: list[dict[str, Any]] = []
    for m in rows:
        content = m.content if len(m.content) <= PROVENANCE_CHARS else m.content[: PROVENANCE_CHARS - 1] + "…"
        out.append(
            {
                "id": str(m.id),
                "content": content,
                "content_hash": v.content_hash(m.content, m.occurred_at),
                "created_at": m.created_at.isoformat(),
            }
        )
        out.extend(
            m.metadata.get("merged_from", []) if isinstance(m.metadata.get("merged_from"), list) else []
        )
    return out


async def _merge(ctx: TaskContext) -> dict[str, Any]:
    """Merge near-duplicates (cosine >= filter.merge_threshold, same project) into the oldest: memories
    are visited oldest first, each absorbing its newer near-duplicates (not theirs in turn, so no
    chain of small differences adds up). One transaction per merge; a cursor in memlane_settings lets
    an interrupted run resume, and is cleared when a run completes."""
    threshold = ctx.write.config.filter.merge_threshold
    store = ctx.write.store
    total = await store.count_embedded()
    cursor = None if ctx.dry_run else await store.get_setting(MERGE_CURSOR)
    after = None
    if cursor:
        created, _, mid = cursor.partition("|")
        after = (datetime.fromisoformat(created), UUID(mid))
    seen, merges, merged_ids = 0, [], 0
    gone: set[UUID] = set()
    while True:
        probes = await store.merge_probes(after, MERGE_BATCH, MERGE_NEIGHBOURS)
        if not probes:
            break
        for p in probes:
            if p.id in gone:
                continue
            newer = [
                nid for nid, sim, key in p.neighbours if sim >= threshold and key > p.key and nid not in gone
            ]
            if not newer:
                continue
            if ctx.dry_run:
                merges.append({"id": str(p.id), "would_merge": [str(n) for n in newer]})
                gone.update(newer)
                merged_ids += len(newer)
                continue
            done = await store.merge_memories(p.id, newer, _provenance)
            if done is not None:
                merges.append(done)
                gone.update(UUID(n) for n in done["merged"])
                merged_ids += len(done["merged"])
        after = probes[-1].key
        seen += len(probes)
        if not ctx.dry_run:
            await store.set_setting(MERGE_CURSOR, f"{after[0].isoformat()}|{after[1]}")
        ctx.report(min(seen, total), total)
    if not ctx.dry_run:
        await store.delete_setting(MERGE_CURSOR)
    key = "would_merge" if ctx.dry_run else "merged"
    return {
        "threshold": threshold,
        "checked": seen,
        "resumed": bool(cursor),
        key: merged_ids,
        "groups": merges[:50],  # the first 50 merges, for the report
        "groups_total": len(merges),
    }


BACKFILL_BATCH = 256


async def _summaries(ctx: TaskContext) -> dict[str, Any]:
    """Topics and fact types for memories stored before they existed (migration 0007), then every
    category summary with pending changes. Each batch and each summary is its own transaction, so
    an interrupted run continues where it stopped; a second run finds nothing to do."""
    w = ctx.write
    store, topics, cfg = w.store, w.topics, w.config.summaries
    unassigned = await store.count_unassigned() if topics.enabled else 0
    stale = await store.stale_categories(None, 0.0)
    if ctx.dry_run:
        return {"would_assign_topics": unassigned, "would_refresh_summaries": len(stale)}
    assigned = skipped = 0
    after = None
    fixed = topics.fixed() if topics.enabled else []
    while topics.enabled:
        batch = await store.unassigned(after, BACKFILL_BATCH)
        if not batch:
            break
        after = batch[-1]["id"]
        updates: list[tuple[UUID, list[str], str, str | None]] = []
        sums: dict[tuple[str, str], list[Any]] = {}  # (project, topic): [vector sum, members, key terms]
        for row in batch:
            if row["embedding"] is None:  # `memlane reembed` has not reached it yet
                skipped += 1
                continue
            auto = await topics.auto_topics(store, row["project"])
            a = topics.assign(row["content"], row["embedding"], fixed, auto)
            add_to_sums(sums, row["project"], row["embedding"], a.auto)
            fact = row["fact_type"] or facttypes.classify(row["content"])
            updates.append((row["id"], list(a.topics), fact, a.topics[0] if a.topics else None))
        try:
            assigned += await store.assign_topics(updates, sums)
        except BaseException:
            topics.forget_cache()
            raise
        ctx.report(assigned + skipped, unassigned)
    stale = await store.stale_categories(None, 0.0)  # the backfill may have filled categories
    summarise = summaries.llm_summariser(w.llm)
    for i, (project, category, pending) in enumerate(stale, 1):
        await summaries.refresh(store, project, category, cfg, pending, summarise=summarise)
        ctx.report(i, len(stale))
    return {
        "assigned_topics": assigned,
        "skipped_without_embedding": skipped,
        "refreshed_summaries": len(stale),
    }


EVENT_TIME_CURSOR = "maintain.event_times"  # the last id read; "done" once every memory was read
EVENT_TIME_BATCH = 500


async def _event_times(ctx: TaskContext) -> dict[str, Any]:
    """Event times (time/events.py) for memories stored before migration 0014, in id order and
    batches of ``EVENT_TIME_BATCH``, each its own statement; the last id read is kept in
    ``memlane_settings``, so an interrupted run continues and a finished one finds nothing (a new
    memory gets its event time when it is written)."""
    store = ctx.write.store
    cursor = await store.get_setting(EVENT_TIME_CURSOR)
    if cursor == "done":
        return {"would_read": 0} if ctx.dry_run else {"read": 0, "dated": 0}
    after = UUID(cursor) if cursor else None
    total = await store.count_event_time_backlog(after)
    if ctx.dry_run:
        return {"would_read": total}
    read = dated = 0
    ctx.report(0, total)
    while batch := await store.event_time_backlog(after, EVENT_TIME_BATCH):
        found = [(mid, *when) for mid, content, said in batch if (when := event_time(content, said))]
        dated += await store.set_event_times(found)
        read += len(batch)
        after = batch[-1][0]
        await store.set_setting(EVENT_TIME_CURSOR, str(after))
        ctx.report(read, max(total, read))
    await store.set_setting(EVENT_TIME_CURSOR, "done")
    return {"read": read, "dated": dated}


PASSAGE_BATCH = 64


async def _passages(ctx: TaskContext) -> dict[str, Any]:
    """Passages (remember/passages.py) for long memories that have none: stored before migration
    0016 or while ``embedding.passages`` was false. In id order and batches of ``PASSAGE_BATCH``,
    each its own transaction. A memory that turns out to fit the window (its characters said it
    might not) is read again by the next run: only its tokens are counted, nothing is embedded."""
    store, embedder, cfg = ctx.write.store, ctx.write.embedder, ctx.write.config.embedding
    await asyncio.to_thread(embedder.load)
    if not cfg.passages or embedder.window is None:
        why = "embedding.passages is false" if not cfg.passages else "the model's window is not known"
        return {"skipped": why}
    total = await store.count_passage_backlog(embedder.window)
    if ctx.dry_run:
        return {"would_read": total}
    read = memories = made = 0
    after: UUID | None = None
    ctx.report(0, total)
    while batch := await store.passage_backlog(after, PASSAGE_BATCH, embedder.window):
        vectors = await passages.embed_passages(embedder, [c for _, _, c in batch], cfg.embed_timeout_s)
        items = [(mid, project, v) for (mid, project, _), v in zip(batch, vectors, strict=True)]
        memories += await store.add_passages(items, model_id=embedder.vector_ids)
        made += sum(len(v) for v in vectors)
        read += len(batch)
        after = batch[-1][0]
        ctx.report(read, max(total, read))
    return {"read": read, "memories": memories, "passages": made}


LINK_BATCH = 200


async def _links(ctx: TaskContext) -> dict[str, Any]:
    """Entities and graph links for memories that have none (stored before migration 0006, or after
    the graph tables were emptied), by the write path's own rules, in (created_at, id) order and
    batches of ``LINK_BATCH``, each its own transaction (resumable: a linked memory is marked);
    then entities no memory mentions any more are deleted."""
    store = ctx.write.store
    total = await store.count_unlinked()
    if ctx.dry_run:
        return {
            "would_link": total,
            "would_delete_orphan_entities": await store.delete_orphan_entities(dry_run=True),
        }
    settings = link_settings(ctx.write.config.graph, ctx.write.embedder)
    done, after = 0, None
    counts: dict[str, int] = {}
    ctx.report(0, total)
    while True:
        rows = await store.unlinked_ids(after, LINK_BATCH)
        if not rows:
            break
        items = [LinkItem(mid, project, extract(content)) for mid, project, content, _ in rows]
        for k, n in (await store.link_existing(items, settings)).items():
            counts[k] = counts.get(k, 0) + n
        done += len(rows)
        after = (rows[-1][3], rows[-1][0])
        ctx.report(done, max(total, done))
    return {"linked": done, **counts, "orphan_entities_deleted": await store.delete_orphan_entities()}


# Run in this order: later tasks (vacuum) benefit from what earlier ones changed.
TASKS: dict[str, Task] = {
    t.name: t
    for t in (
        Task("purge", "delete memories past their expires_at, in batches", _purge),
        Task("merge", "merge near-duplicates (filter.merge_threshold) of a project into the oldest", _merge),
        Task("links", "entities and graph links for memories without them (an upgraded store)", _links),
        Task(
            "event_times", "the times memories' contents name, for memories stored before them", _event_times
        ),
        Task("passages", "vectors for the later parts of long memories stored before them", _passages),
        Task(
            "summaries",
            "topics and fact types for memories stored before them; refresh changed category summaries",
            _summaries,
        ),
        Task("vacuum", "VACUUM (ANALYZE) memlane's tables: planner statistics and dead rows", _analyse),
    )
}


async def reembed(
    ctx: WriteContext, batch_size: int = 256, progress: Callable[[int], object] | None = None
) -> int:
    """Give every memory a vector from the configured model; resumable (only memories without a
    vector are embedded, so an interrupted run continues where it stopped). ``progress(n)``: ``n``
    more memories have their vector."""
    store, embedder = ctx.store, ctx.embedder
    recorded = await store.get_setting("embedding_model")
    recorded_dim = await store.get_setting("embedding_dim")
    if recorded not in embedder.vector_ids or recorded_dim != str(embedder.dim):
        await store.switch_model(embedder.model_id, embedder.dim)
    done = 0
    async for batch in store.iter_memories(batch=batch_size, missing_embedding=True):
        vectors = await asyncio.to_thread(embedder.embed_memories, [m.content for m in batch])
        later = await passages.embed_passages(
            embedder,
            [m.content for m in batch],
            ctx.config.embedding.embed_timeout_s,
            enabled=ctx.config.embedding.passages,
        )
        await store.set_embeddings(
            [(m.id, vec) for m, vec in zip(batch, vectors, strict=True)],
            model_id=embedder.vector_ids,
            passages=[(m.id, m.project, ps) for m, ps in zip(batch, later, strict=True)],
        )
        done += len(batch)
        if progress:
            progress(len(batch))
    return done


def resolve(selected: list[str] | None) -> list[Task]:
    if not selected:
        return list(TASKS.values())
    unknown = [n for n in selected if n not in TASKS]
    if unknown:
        raise InvalidInput(f"unknown maintain task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    return [t for name, t in TASKS.items() if name in selected]


async def maintain(
    engine: WritesThrough,
    tasks: list[str] | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> list[TaskReport]:
    """Run ``tasks`` (default: all, in ``TASKS`` order) under the maintain lock; the engine gives
    the tasks their write context and nothing else."""
    chosen = resolve(tasks)
    write = engine.write_context()
    async with write.store.try_advisory_lock(MAINTAIN_LOCK_KEY) as got:
        if not got:
            raise StoreError("another `memlane maintain` is running on this database; wait for it to finish")
        reports = []
        for task in chosen:
            started = time.monotonic()
            summary = await task.run(TaskContext(write, dry_run=dry_run, progress=progress, task=task.name))
            reports.append(TaskReport(task.name, (time.monotonic() - started) * 1000, summary))
        return reports
