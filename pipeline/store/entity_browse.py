"""Read queries of the memory browser's entity and graph pages (``server/ui``): a project's entities
page by page, one entity with its memories and the entities it co-occurs with, and a memory's
entities and links.

The entity list is ordered by ``key`` (the normalised name) and paged by keyset: ``key`` is unique
per project (``UNIQUE (project, key)`` in migration 0006), so that index serves both the order and
the cursor, and page 500 costs what page 1 costs. Counts come from ``memory_entities_entity``
(entity_id, memory_id), an index-only range per listed entity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from memlane.pipeline.errors import NotFound
from memlane.pipeline.records import Memory
from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.browse import decode_cursor, encode_cursor
from memlane.pipeline.store.rows import M_MEMORY_COLUMNS, row_to_memory


@dataclass(frozen=True, slots=True)
class Entity:
    id: int
    project: str
    key: str
    name: str
    kind: str
    mentions: int = 0
    last_seen: datetime | None = None


@dataclass(frozen=True, slots=True)
class EntityPage:
    entities: list[Entity]
    next_cursor: str | None  # the last key of this page; None: this is the last page


@dataclass(frozen=True, slots=True)
class MemoryLink:
    kind: str  # relates_to, next, previous (a "next" read backwards), same_time, causes
    memory: Memory
    weight: float
    outgoing: bool


def _like(q: str) -> str:
    return q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# Mentions and the newest of them, per entity; a lateral over the (entity_id, memory_id) index.
_COUNTS = (
    " CROSS JOIN LATERAL (SELECT count(*) AS mentions, max(m.created_at) AS last_seen"
    "  FROM memory_entities me JOIN memories m ON m.id = me.memory_id WHERE me.entity_id = e.id) c"
)


CO_OCCURRENCE_SAMPLE = 2000


class EntityBrowseQueries(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    async def project_entities(
        self, project: str, *, q: str = "", after: str | None = None, limit: int = 50
    ) -> EntityPage:
        """One page of a project's entities by name; ``q`` keeps those whose name contains it
        (case-insensitive), ``after`` is a page's ``next_cursor``."""
        filters = ["e.project = %s"]
        params: list[Any] = [project]
        if q:
            filters.append("e.key LIKE %s")
            params.append(f"%{_like(q.lower())}%")
        if after is not None:
            filters.append("e.key > %s")
            params.append(decode_cursor(after, "entities")[0])
        sql = (
            "SELECT e.*, c.mentions, c.last_seen FROM (SELECT e.id, e.project, e.key, e.name, e.kind"
            f" FROM memlane_entities e WHERE {' AND '.join(filters)} ORDER BY e.key LIMIT %s) AS e{_COUNTS}"
        )
        params.append(limit + 1)
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql + " ORDER BY e.key", params)
            rows = await cur.fetchall()
        more = len(rows) > limit
        entities = [Entity(**r) for r in rows[:limit]]
        return EntityPage(entities, encode_cursor([entities[-1].key]) if more else None)

    async def entity(self, entity_id: int) -> Entity:
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                "SELECT e.id, e.project, e.key, e.name, e.kind, c.mentions, c.last_seen"
                f" FROM memlane_entities e{_COUNTS} WHERE e.id = %s",
                (entity_id,),
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no entity has id {entity_id}")
        return Entity(**row)

    async def entity_memories(
        self, entity_id: int, *, cursor: str | None = None, limit: int = 20
    ) -> tuple[list[Memory], str | None]:
        """The memories that mention an entity, newest first, and the next page's cursor."""
        filters = ["me.entity_id = %s"]
        params: list[Any] = [entity_id]
        if cursor is not None:
            filters.append("(m.created_at, m.id) < (%s, %s)")
            params.extend(decode_cursor(cursor, "created"))
        params.append(limit + 1)
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                f"SELECT {M_MEMORY_COLUMNS} FROM memory_entities me JOIN memories m ON m.id = me.memory_id"
                f" WHERE {' AND '.join(filters)} ORDER BY m.created_at DESC, m.id DESC LIMIT %s",
                params,
            )
            rows = await cur.fetchall()
        memories = [row_to_memory(r) for r in rows[:limit]]
        more = len(rows) > limit
        last = memories[-1] if memories else None
        return memories, encode_cursor([last.created_at, last.id]) if more and last else None

    async def co_occurring(self, entity_id: int, limit: int = 10) -> list[tuple[Entity, int]]:
        """The entities mentioned with this one most often, with the number of shared memories,
        counted over at most ``CO_OCCURRENCE_SAMPLE`` of its memories: a hub (the user's own name)
        would otherwise read every mention of every entity in thousands of memories."""
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                "SELECT e.id, e.project, e.key, e.name, e.kind, s.shared FROM ("
                " SELECT b.entity_id, count(*) AS shared FROM (SELECT memory_id FROM memory_entities"
                "  WHERE entity_id = %(e)s LIMIT %(cap)s) a"
                " JOIN memory_entities b ON b.memory_id = a.memory_id AND b.entity_id <> %(e)s"
                " GROUP BY b.entity_id ORDER BY shared DESC, b.entity_id LIMIT %(n)s) s"
                " JOIN memlane_entities e ON e.id = s.entity_id ORDER BY s.shared DESC, e.id",
                {"e": entity_id, "cap": CO_OCCURRENCE_SAMPLE, "n": limit},
            )
            rows = await cur.fetchall()
        return [(Entity(**{k: v for k, v in r.items() if k != "shared"}), int(r["shared"])) for r in rows]

    async def memory_entities(self, memory_ids: list[UUID]) -> list[tuple[UUID, Entity]]:
        """(memory id, entity) for every entity these memories mention."""
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                "SELECT me.memory_id, e.id, e.project, e.key, e.name, e.kind FROM memory_entities me"
                " JOIN memlane_entities e ON e.id = me.entity_id WHERE me.memory_id = ANY(%s)"
                " ORDER BY e.key",
                (list(memory_ids),),
            )
            rows = await cur.fetchall()
        return [(r.pop("memory_id"), Entity(**r)) for r in rows]

    async def memory_links(self, memory_id: UUID, limit: int = 50) -> list[MemoryLink]:
        """A memory's typed links, both directions (``next`` read backwards is ``previous``),
        strongest first."""
        cols = M_MEMORY_COLUMNS
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                f"(SELECT l.kind AS link_kind, l.weight::float8 AS link_weight, true AS outgoing, {cols}"
                "  FROM memory_links l JOIN memories m ON m.id = l.dst WHERE l.src = %(id)s LIMIT %(n)s)"
                " UNION ALL"
                f" (SELECT CASE l.kind WHEN 'next' THEN 'previous' ELSE l.kind END, l.weight::float8, false,"
                f"  {cols} FROM memory_links l JOIN memories m ON m.id = l.src WHERE l.dst = %(id)s LIMIT %(n)s)"
                " ORDER BY link_weight DESC, id",
                {"id": memory_id, "n": limit},
            )
            rows = await cur.fetchall()
        out: list[MemoryLink] = []
        for r in rows[:limit]:
            kind, weight, outgoing = r.pop("link_kind"), r.pop("link_weight"), r.pop("outgoing")
            out.append(MemoryLink(kind, row_to_memory(r), weight, outgoing))
        return out


def entity_id(value: Any) -> int:
    """An entity id from a path: a positive integer, or NotFound."""
    try:
        n = int(str(value))
    except ValueError:
        raise NotFound(f"no entity has id {value!r}") from None
    if not 0 < n < 2**63:
        raise NotFound(f"no entity has id {value!r}")
    return n
