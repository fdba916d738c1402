"""``memlane maintain``: upkeep of a store, one registered task at a time.

Every task is idempotent and resumable (it works in its own short transactions, so an interrupted
run loses at most its current batch and the next run continues), reports progress, and is safe while
servers run. Only one ``maintain`` runs per database at a time (an advisory lock); a second one is
refused with a clear message instead of waiting.

Adding a task is one function plus one line in ``TASKS``: ``run(engine, ctx)`` does the work (or,
with ``ctx.dry_run``, only counts what it would do) and returns a summary dict for the report.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput, StoreError

if TYPE_CHECKING:
    from .engine import Engine

# pg_try_advisory_lock key of a running ``memlane maintain`` (the migration lock is another key).
MAINTAIN_LOCK_KEY = 0x6D6C6D61  # "mlma"


@dataclass(slots=True)
class TaskContext:
    dry_run: bool = False
    # progress(task, done, total or None): called as work is done; total None when unknown.
    progress: Callable[[str, int, int | None], None] | None = None
    task: str = ""

    def report(self, done: int, total: int | None = None) -> None:
        if self.progress is not None:
            self.progress(self.task, done, total)


TaskRunner = Callable[["Engine", TaskContext], Awaitable[dict[str, Any]]]


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


async def _analyse(engine: Engine, ctx: TaskContext) -> dict[str, Any]:
    """Refresh the planner's statistics and reclaim dead rows (VACUUM takes no lock that blocks
    reads or writes)."""
    tables = await engine.store.maintenance_tables()
    if ctx.dry_run:
        return {"would_vacuum": tables}
    for i, table in enumerate(tables, 1):
        await engine.store.vacuum_analyse(table)
        ctx.report(i, len(tables))
    return {"vacuumed": tables}


LINK_BATCH = 200


async def _links(engine: Engine, ctx: TaskContext) -> dict[str, Any]:
    """Entities and graph links for memories that have none (stored before migration 0006, or after
    the graph tables were emptied), by the write path's own rules, in (created_at, id) order and
    batches of ``LINK_BATCH``, each its own transaction (resumable: a linked memory is marked);
    then entities no memory mentions any more are deleted."""
    from .entities import extract
    from .remember import link_settings
    from .store.graph import LinkItem

    store = engine.store
    total = await store.count_unlinked()
    if ctx.dry_run:
        return {
            "would_link": total,
            "would_delete_orphan_entities": await store.delete_orphan_entities(dry_run=True),
        }
    settings = link_settings(engine.config.graph)
    done, counts, after = 0, {}, None
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
        Task("links", "entities and graph links for memories without them (an upgraded store)", _links),
        Task("vacuum", "VACUUM (ANALYZE) memlane's tables: planner statistics and dead rows", _analyse),
    )
}


def resolve(selected: list[str] | None) -> list[Task]:
    if not selected:
        return list(TASKS.values())
    unknown = [n for n in selected if n not in TASKS]
    if unknown:
        raise InvalidInput(f"unknown maintain task(s) {', '.join(unknown)}; known: {', '.join(TASKS)}")
    return [t for name, t in TASKS.items() if name in selected]


async def maintain(
    engine: Engine,
    tasks: list[str] | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> list[TaskReport]:
    chosen = resolve(tasks)
    async with engine.store.try_advisory_lock(MAINTAIN_LOCK_KEY) as got:
        if not got:
            raise StoreError("another `memlane maintain` is running on this database; wait for it to finish")
        reports = []
        for task in chosen:
            started = time.monotonic()
            summary = await task.run(engine, TaskContext(dry_run=dry_run, progress=progress, task=task.name))
            reports.append(TaskReport(task.name, (time.monotonic() - started) * 1000, summary))
        return reports
