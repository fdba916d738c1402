"""Supersession's SQL (migration 0013), the store's part of ``pipeline/supersession/``: the
memories the detector compares and recall brings in, the marks they set, recall's look-up of the
memories that replaced its candidates, and a memory's history: the versions its updates replaced
and its chain. Kept in the store, below every layer that reads it (recall's ``include_history``, the
browser): the rest of supersession is in ``pipeline/supersession/``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from memlane.pipeline.errors import InvalidInput, NotFound
from memlane.pipeline.records import Memory
from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.connection import read_again_once
from memlane.pipeline.store.rows import M_MEMORY_COLUMNS, row_to_memory


class SupersessionQueries(StorePart):
    """Mixed into Store; needs ``_connection()``, ``_serialise_writes`` and ``_serialise_writes_of``."""

    async def mark_superseded(
        self, project: str, pairs: Sequence[tuple[UUID, UUID]]
    ) -> set[tuple[UUID, UUID]]:
        """Each (old, new) of ``project``: ``old`` is superseded by ``new`` from the time ``new``'s
        value starts, unless ``old`` is superseded already, or either is gone. Returns the pairs
        marked."""
        if not pairs:
            return set()
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes(conn, [project])
            cur = await conn.execute(
                "UPDATE memories o SET superseded_by = n.id, valid_until = coalesce(n.occurred_at, n.created_at)"
                " FROM unnest(%s::uuid[], %s::uuid[]) AS p(old, new)"
                " JOIN memories n ON n.id = p.new AND n.project = %s"
                " WHERE o.id = p.old AND o.project = %s AND o.superseded_by IS NULL AND o.id <> n.id"
                " RETURNING o.id, n.id",
                ([p[0] for p in pairs], [p[1] for p in pairs], project, project),
            )
            return {(r[0], r[1]) for r in await cur.fetchall()}

    async def mark_conflicts(self, project: str, pairs: Sequence[tuple[UUID, UUID]]) -> None:
        """Each (a, b) of ``project`` contradict each other: each names the other in
        ``conflicts_with`` (once)."""
        if not pairs:
            return
        both = [(a, b) for a, b in pairs] + [(b, a) for a, b in pairs]
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes(conn, [project])
            await conn.execute(
                "UPDATE memories m SET conflicts_with = ARRAY(SELECT DISTINCT x FROM unnest("
                " coalesce(m.conflicts_with, '{}') || p.others) x)"
                " FROM (SELECT a, array_agg(b) AS others FROM unnest(%s::uuid[], %s::uuid[]) AS t(a, b)"
                "       GROUP BY a) p"
                " WHERE m.id = p.a AND m.project = %s",
                ([a for a, _ in both], [b for _, b in both], project),
            )

    @read_again_once
    async def memories_by_id(self, ids: Sequence[UUID]) -> dict[UUID, Memory]:
        """These memories, by id (those that exist)."""
        if not ids:
            return {}
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                f"SELECT {M_MEMORY_COLUMNS} FROM memories m WHERE m.id = ANY(%s)", (list(ids),)
            )
            return {r["id"]: row_to_memory(r) for r in await cur.fetchall()}

    async def set_successor(self, old: UUID, new: UUID | None) -> Memory:
        """A user's decision: ``old`` is superseded by ``new`` (both of one project; ``new`` not
        itself replaced, directly or down its chain, by ``old``), or, with None, current again.
        Returns ``old`` as it now is."""
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes_of(conn, [old] if new is None else [old, new])
            cur = await conn.execute(
                "SELECT id, project FROM memories WHERE id = ANY(%s)", ([old] if new is None else [old, new],)
            )
            found = {r[0]: r[1] for r in await cur.fetchall()}
            for mid in (old, new):
                if mid is not None and mid not in found:
                    raise NotFound(f"no memory has id {mid}")
            if new is not None:
                if new == old:
                    raise InvalidInput("a memory cannot supersede itself")
                if found[new] != found[old]:
                    raise InvalidInput(
                        f"both memories must be of one project (one is in {found[old]!r}, the other in {found[new]!r})"
                    )
                cur = await conn.execute(
                    "WITH RECURSIVE chain(id, depth) AS (SELECT superseded_by, 1 FROM memories WHERE id = %s"
                    "  UNION ALL SELECT m.superseded_by, c.depth + 1 FROM chain c JOIN memories m ON m.id = c.id"
                    "  WHERE m.superseded_by IS NOT NULL AND c.depth < 64)"
                    " SELECT 1 FROM chain WHERE id = %s",
                    (new, old),
                )
                if await cur.fetchone() is not None:
                    raise InvalidInput(f"{old} already supersedes {new}: unsupersede it first")
            updated = await conn.cursor(row_factory=dict_row).execute(
                "UPDATE memories m SET superseded_by = %s,"
                " valid_until = (SELECT coalesce(occurred_at, created_at) FROM memories WHERE id = %s)"
                f" WHERE m.id = %s RETURNING {M_MEMORY_COLUMNS}",
                (new, new, old),
            )
            row = await updated.fetchone()
        assert row is not None  # found above, under the project's write turn
        return row_to_memory(row)

    @read_again_once
    async def versions(self, memory_id: UUID) -> list[dict[str, Any]]:
        """The memory's earlier contents that updates replaced, oldest first: version, content,
        occurred_at, category, tags, metadata, replaced_at."""
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                "SELECT version, content, occurred_at, category, tags, metadata, replaced_at"
                " FROM memory_versions WHERE memory_id = %s ORDER BY version",
                (memory_id,),
            )
            return list(await cur.fetchall())

    @read_again_once
    async def history_of(
        self, ids: Sequence[UUID]
    ) -> dict[UUID, list[tuple[UUID, str, datetime, datetime | None]]]:
        """For each of these memories, the memories it replaced, and those they replaced, up to a
        chain of 16: (id, content, valid from, valid until), newest first."""
        if not ids:
            return {}
        async with self._connection() as conn:
            cur = await conn.execute(
                "WITH RECURSIVE chain(root, id, depth) AS ("
                "  SELECT m.superseded_by, m.id, 1 FROM memories m WHERE m.superseded_by = ANY(%s)"
                "  UNION ALL SELECT c.root, m.id, c.depth + 1 FROM chain c"
                "  JOIN memories m ON m.superseded_by = c.id WHERE c.depth < 16)"
                " SELECT c.root, m.id, m.content, coalesce(m.occurred_at, m.created_at), m.valid_until"
                " FROM chain c JOIN memories m ON m.id = c.id"
                " ORDER BY c.root, coalesce(m.occurred_at, m.created_at) DESC, m.id",
                (list(ids),),
            )
            out: dict[UUID, list[tuple[UUID, str, datetime, datetime | None]]] = {}
            for root, mid, content, since, until in await cur.fetchall():
                out.setdefault(root, []).append((mid, content, since, until))
            return out

    @read_again_once
    async def successors(self, ids: Sequence[UUID]) -> dict[UUID, Memory]:
        """For each of these superseded memories, the current memory at the end of its chain (a
        successor superseded in turn is followed, up to a chain of 16)."""
        if not ids:
            return {}
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                "WITH RECURSIVE chain(start, id, depth) AS ("
                "  SELECT m.id, m.superseded_by, 1 FROM memories m"
                "  WHERE m.id = ANY(%s) AND m.superseded_by IS NOT NULL"
                "  UNION ALL SELECT c.start, m.superseded_by, c.depth + 1 FROM chain c"
                "  JOIN memories m ON m.id = c.id WHERE m.superseded_by IS NOT NULL AND c.depth < 16)"
                f" SELECT DISTINCT ON (c.start) c.start AS start_id, {M_MEMORY_COLUMNS}"
                " FROM chain c JOIN memories m ON m.id = c.id"
                " ORDER BY c.start, c.depth DESC",
                (list(ids),),
            )
            return {r["start_id"]: row_to_memory(r) for r in await cur.fetchall()}
