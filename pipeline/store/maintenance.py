"""Queries for novelty (nearest stored memories of a batch) and for ``memlane maintain``'s purge and
merge tasks. Mixed into ``Store``; every query goes through ``Store._connection()``."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from memlane.pipeline.providers.embedding.base import unit_rows
from memlane.pipeline.records import Memory
from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.graph import NEIGHBOUR_EF_SEARCH, neighbour_scan
from memlane.pipeline.store.rows import MEMORY_COLUMNS, row_to_memory
from memlane.pipeline.store.vectors import project_is
from memlane.pipeline.store.writes import write_passages


@dataclass(frozen=True, slots=True)
class MergeProbe:
    """One memory of a merge batch and its nearest neighbours in its project (id, similarity, and
    the neighbour's (created_at, id) ordering key)."""

    id: UUID
    project: str
    key: tuple[datetime, UUID]
    neighbours: tuple[tuple[UUID, float, tuple[datetime, UUID]], ...]


# A project without its index and this many vectors or fewer (one remember's) is searched exactly
# by the server, which sends back k rows; more (an ingest, an import) read the project's vectors
# once and search them all in numpy. One vector against 1,000 memories: ~1 ms in SQL, ~15 ms to
# read the 1.5 MB of vectors.
EXACT_IN_SQL_MAX = 8


def _exact_nearest(
    queries: np.ndarray, rows: list[tuple[UUID, Any]], k: int
) -> list[list[tuple[UUID, float]]]:
    """The ``k`` most cosine-similar rows (id, embedding) to each query, best first."""
    if not rows:
        return [[] for _ in range(len(queries))]
    ids = [r[0] for r in rows]
    mat = unit_rows([r[1].to_numpy() if hasattr(r[1], "to_numpy") else r[1] for r in rows])
    sims = unit_rows(queries) @ mat.T
    k = min(k, len(ids))
    top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    out = []
    for i, cols in enumerate(top):
        best = sorted(cols, key=lambda j: -sims[i, j])
        out.append([(ids[j], float(sims[i, j])) for j in best])
    return out


class MaintenanceQueries(StorePart):
    async def nearest_many(
        self, project: str, embeddings: list[list[float]], k: int, *, ef_search: int | None = None
    ) -> list[list[tuple[UUID, float]]]:
        """For each vector, its ``k`` nearest unexpired memories of ``project`` as (id, cosine
        similarity), best first. Not retried on a lost connection, unlike other reads: it is the
        first statement of a remember or an ingest, which then fails whole ("retry the call") as a
        write does.

        A project with its own vector index (store/vectors.py) is searched through it, one LATERAL
        HNSW scan per vector with ``ef_search`` (None: the session's), the index forced: PostgreSQL's
        planner prices pgvector's scan above reading and sorting a project of a few thousand rows,
        which costs ~8x more per vector here. A smaller project is searched exactly: by the server
        for a few vectors (``EXACT_IN_SQL_MAX``), else read whole once for the batch and searched
        in numpy."""
        if not embeddings or k < 1:
            return [[] for _ in embeddings]
        queries = np.asarray(embeddings, dtype=np.float32)
        async with self._connection() as conn:
            indexed = await self.is_indexed(conn, project)
            if not indexed and len(queries) > EXACT_IN_SQL_MAX:
                async with conn.cursor(binary=True) as bcur:  # vectors as bytes, not decimal text
                    await bcur.execute(
                        "SELECT id, embedding FROM memories WHERE project = %s AND embedding IS NOT NULL"
                        " AND (expires_at IS NULL OR expires_at > now())",
                        (project,),
                    )
                    rows = await bcur.fetchall()
                return _exact_nearest(queries, rows, k)
            sql = (
                "SELECT q.ord, n.id, n.sim FROM unnest(%b::vector[]) WITH ORDINALITY AS q(v, ord)"
                " CROSS JOIN LATERAL ("
                "  SELECT m.id, 1 - (m.embedding <=> q.v) AS sim FROM memories m"
                f"  WHERE {project_is('m.project', project)} AND m.embedding IS NOT NULL"
                "    AND (m.expires_at IS NULL OR m.expires_at > now())"
                "  ORDER BY m.embedding <=> q.v LIMIT %s) n"
            )
            if indexed:  # the index's SET LOCALs need a transaction
                async with conn.transaction():
                    await neighbour_scan(conn, force_index=True, ef_search=ef_search)
                    found = await (await conn.execute(sql, (list(queries), k))).fetchall()
            else:  # one statement: an exact scan of the project's rows, in the server
                found = await (await conn.execute(sql, (list(queries), k))).fetchall()
        out: list[list[tuple[UUID, float]]] = [[] for _ in embeddings]
        for ord_, mid, sim in found:
            out[ord_ - 1].append((mid, float(sim)))
        for hits in out:
            hits.sort(key=lambda h: -h[1])
        return out

    # -- purge ----------------------------------------------------------------------------------

    async def count_expired(self) -> int:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM memories WHERE expires_at <= now()")
            count: int = (await one_row(cur))[0]
            return count

    async def purge_expired(self, batch: int) -> int:
        """Delete up to ``batch`` memories past their ``expires_at``; returns how many. Rows another
        transaction holds are skipped (the next batch or run takes them). The projects' writes
        wait meanwhile (``_serialise_writes``: a link must not be written to a memory going)."""
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT DISTINCT project FROM (SELECT project FROM memories WHERE expires_at <= now()"
                " ORDER BY expires_at, id LIMIT %s) e",
                (batch,),
            )
            projects = [r[0] for r in await cur.fetchall()]
            if not projects:
                return 0
            await self._serialise_writes(conn, projects)
            cur = await conn.execute(
                "DELETE FROM memories WHERE id IN (SELECT id FROM memories WHERE expires_at <= now()"
                " AND project = ANY(%s) ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED)",
                (projects, batch),
            )
            return cur.rowcount

    # -- event times (migration 0014) -----------------------------------------------------------

    async def event_time_backlog(self, after: UUID | None, batch: int) -> list[tuple[UUID, str, datetime]]:
        """Up to ``batch`` memories without an event time, by id after ``after``: (id, content,
        when it was said)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT id, content, coalesce(occurred_at, created_at) FROM memories"
                " WHERE event_start IS NULL AND (%(after)s::uuid IS NULL OR id > %(after)s::uuid)"
                " ORDER BY id LIMIT %(batch)s",
                {"after": after, "batch": batch},
            )
            return [(r[0], r[1], r[2]) for r in await cur.fetchall()]

    async def count_event_time_backlog(self, after: UUID | None) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM memories"
                " WHERE event_start IS NULL AND (%(after)s::uuid IS NULL OR id > %(after)s::uuid)",
                {"after": after},
            )
            count: int = (await one_row(cur))[0]
            return count

    async def set_event_times(self, rows: list[tuple[UUID, datetime, datetime]]) -> int:
        """Set (id, event_start, event_end) where a memory still has none; returns how many."""
        if not rows:
            return 0
        async with self._connection() as conn:
            cur = await conn.execute(
                "UPDATE memories m SET event_start = v.s, event_end = v.e"
                " FROM unnest(%s::uuid[], %s::timestamptz[], %s::timestamptz[]) AS v(id, s, e)"
                " WHERE m.id = v.id AND m.event_start IS NULL",
                ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
            )
            return cur.rowcount

    # Memories that may be longer than the model's window (``min`` characters) and have a vector
    # but no passages.
    _PASSAGE_BACKLOG = (
        "char_length(m.content) > %(min)s AND m.embedding IS NOT NULL"
        " AND NOT EXISTS (SELECT 1 FROM memory_passages p WHERE p.memory_id = m.id)"
    )

    async def passage_backlog(
        self, after: UUID | None, batch: int, min_chars: int
    ) -> list[tuple[UUID, str, str]]:
        """Up to ``batch`` memories longer than ``min_chars`` characters that have a vector but no
        passages, by id after ``after``: (id, project, content)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT m.id, m.project, m.content FROM memories m WHERE {self._PASSAGE_BACKLOG}"
                " AND (%(after)s::uuid IS NULL OR m.id > %(after)s::uuid) ORDER BY m.id LIMIT %(batch)s",
                {"after": after, "batch": batch, "min": min_chars},
            )
            return [(r[0], r[1], r[2]) for r in await cur.fetchall()]

    async def count_passage_backlog(self, min_chars: int) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT count(*) FROM memories m WHERE {self._PASSAGE_BACKLOG}", {"min": min_chars}
            )
            count: int = (await one_row(cur))[0]
            return count

    async def add_passages(
        self, items: list[tuple[UUID, str, tuple[Any, ...]]], *, model_id: str | Collection[str]
    ) -> int:
        """Passages (memory id, project, vectors) for memories that have none and are still stored,
        if the store's model is still ``model_id``'s; returns how many memories got them."""
        items = [i for i in items if i[2]]
        if not items:
            return 0
        async with self._connection() as conn, conn.transaction():
            await self._check_model(conn, model_id)
            cur = await conn.execute(
                "SELECT m.id FROM memories m WHERE m.id = ANY(%s)"
                " AND NOT EXISTS (SELECT 1 FROM memory_passages p WHERE p.memory_id = m.id) FOR SHARE",
                ([i[0] for i in items],),
            )
            open_ids = {r[0] for r in await cur.fetchall()}
            todo = [i for i in items if i[0] in open_ids]
            await write_passages(conn, todo)
            return len(todo)

    # -- merge ----------------------------------------------------------------------------------

    async def set_setting(self, key: str, value: str) -> None:
        async with self._connection() as conn:
            await conn.execute(
                "INSERT INTO memlane_settings (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    async def delete_setting(self, key: str) -> None:
        async with self._connection() as conn:
            await conn.execute("DELETE FROM memlane_settings WHERE key = %s", (key,))

    async def count_embedded(self) -> int:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM memories WHERE embedding IS NOT NULL")
            count: int = (await one_row(cur))[0]
            return count

    async def merge_probes(self, after: tuple[datetime, UUID] | None, batch: int, k: int) -> list[MergeProbe]:
        """The next ``batch`` memories in (created_at, id) order after ``after``, each with its ``k``
        nearest neighbours in its project: one statement per project of the batch, which names it
        (its vector index serves only a query that does, store/vectors.py)."""
        where = ""
        params: list[Any] = []
        if after is not None:
            where = "AND (created_at, id) > (%s, %s)"
            params = list(after)
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                f"SELECT id, project FROM memories WHERE embedding IS NOT NULL {where}"
                " ORDER BY created_at, id LIMIT %s",
                (*params, batch),
            )
            by_project: dict[str, list[UUID]] = {}
            for mid, project in await cur.fetchall():
                by_project.setdefault(project, []).append(mid)
            rows: list[tuple[Any, ...]] = []
            for project, ids in by_project.items():
                indexed = await self.is_indexed(conn, project)
                await neighbour_scan(conn, force_index=indexed, ef_search=NEIGHBOUR_EF_SEARCH)
                cur = await conn.execute(
                    "WITH b AS (SELECT id, project, created_at, embedding FROM memories WHERE id = ANY(%s))"
                    " SELECT b.id, b.project, b.created_at, n.id, n.sim, n.created_at FROM b"
                    " LEFT JOIN LATERAL ("
                    "  SELECT m.id, 1 - (m.embedding <=> b.embedding) AS sim, m.created_at FROM memories m"
                    f"  WHERE {project_is('m.project', project)} AND m.embedding IS NOT NULL AND m.id <> b.id"
                    "  ORDER BY m.embedding <=> b.embedding LIMIT %s) n ON true",
                    (ids, k),
                )
                rows += await cur.fetchall()
        rows.sort(key=lambda r: (r[2], r[0], -(r[4] if r[4] is not None else -2.0)))
        probes: dict[UUID, MergeProbe] = {}
        for bid, project, created, nid, sim, ncreated in rows:
            p = probes.get(bid)
            if p is None:
                p = probes[bid] = MergeProbe(bid, project, (created, bid), ())
            if nid is not None:
                probes[bid] = MergeProbe(
                    bid, project, p.key, (*probes[bid].neighbours, (nid, float(sim), (ncreated, nid)))
                )
        return list(probes.values())

    async def merge_memories(
        self, survivor: UUID, merged: list[UUID], provenance: Callable[[list[Memory]], list[dict[str, Any]]]
    ) -> dict[str, Any] | None:
        """Merge ``merged`` into ``survivor`` in one transaction: the survivor keeps its id, content
        and dates, gains the union of tags, the highest priority, pinned if any was, the latest expiry
        (none if any had none) and ``metadata.merged_from`` (``provenance(rows)`` builds the entries);
        the merged rows are deleted. Rows already gone are skipped; None when nothing was merged."""
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes_of(conn, [survivor, *merged])
            cur = await conn.cursor(row_factory=dict_row).execute(
                f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
                ([survivor, *merged],),
            )
            rows = {r["id"]: row_to_memory(r) for r in await cur.fetchall()}
            keep = rows.pop(survivor, None)
            gone = [rows[i] for i in merged if i in rows]
            if keep is None or not gone:
                return None
            group = [keep, *gone]
            tags = list(dict.fromkeys(t for m in group for t in m.tags))
            expiries = [m.expires_at for m in group if m.expires_at is not None]
            expires = max(expiries) if len(expiries) == len(group) else None  # none if any had none
            metadata = dict(keep.metadata)
            metadata["merged_from"] = [*metadata.get("merged_from", []), *provenance(gone)]
            await conn.execute(
                "UPDATE memories SET tags = %s, priority = %s, pinned = %s, expires_at = %s,"
                " metadata = %s, category = %s, updated_at = now() WHERE id = %s",
                (
                    tags,
                    max(m.priority for m in group),
                    any(m.pinned for m in group),
                    expires,
                    Jsonb(metadata),
                    keep.category or next((m.category for m in gone if m.category), None),
                    survivor,
                ),
            )
            await conn.execute("DELETE FROM memories WHERE id = ANY(%s)", ([m.id for m in gone],))
        return {"id": str(survivor), "merged": [str(m.id) for m in gone]}

    # -- vacuum ---------------------------------------------------------------------------------

    async def maintenance_tables(self) -> list[str]:
        """memlane's own tables in the current schema (what ``maintain`` vacuums)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND (tablename IN ('memories', 'category_summaries') OR tablename LIKE 'memlane%%'"
                " OR tablename LIKE 'memory%%')"
                " ORDER BY tablename"
            )
            return [r[0] for r in await cur.fetchall()]

    async def vacuum_analyse(self, table: str) -> None:
        """VACUUM (ANALYZE) one table (pool connections are in autocommit mode, as VACUUM needs)."""
        async with self._connection() as conn:
            await conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))
