"""The memory graph's read side: a bounded neighbourhood for the graph arm (``pipeline/graph/arm.py``),
in one statement per hop, and the extras a recall's output may carry (a memory's conversation
neighbours, the facts about the entities it mentions). The tables are written by ``graph.py``."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.connection import read_again_once

EDGE_KINDS = ("relates_to", "next", "same_time", "causes")

# An entity's number of mentions, counted no further than ``%(cap)s``: the graph arm only asks whether
# an entity is specific enough to expand (at most graph.max_entity_degree mentions) and, if so, how
# many it has. Counting a hub's every mention (the user's own name: thousands at 100k memories)
# read its whole index range for a question nobody asked.
_MENTIONS_UP_TO = (
    "(SELECT count(*) FROM (SELECT 1 FROM memory_entities d WHERE d.entity_id = {entity} LIMIT %(cap)s) AS c)"
)


@dataclass(frozen=True, slots=True)
class GraphRead:
    """One read of the graph arm (``Store.graph_reads``): the links of memories (of ``kinds``, both
    directions), the entities memories mention, or the members of entities."""

    what: Literal["edges", "mentions", "members"]
    ids: tuple[UUID, ...] | tuple[int, ...]  # memory ids (edges, mentions) or entity ids (members)
    kinds: tuple[str, ...] = ()  # edges: the link kinds


# Each read of ``graph_reads`` as one branch of a UNION ALL, tagged with its place in the list; the
# columns are (read, a, b, entity, kind, weight, mentions). Memory ids go in binary (%b): as text,
# formatting them took about 4% of a recall's event loop. A node's links are its first ``per_node``
# in (kind, the other end) order: without an order, which links a node past the bound kept
# depended on the plan, and one question asked twice could get two answers.
_READ_SQL = {
    # A link read backwards keeps its kind, except that "next" read backwards is "previous".
    "edges": "SELECT {i}, s.src, s.dst, NULL::bigint, s.kind, s.weight::float8, NULL::bigint"
    " FROM unnest(%(ids{i})b::uuid[]) AS q(id)"
    " CROSS JOIN LATERAL (SELECT src, dst, kind, weight FROM memory_links"
    "   WHERE src = q.id AND kind = ANY(%(kinds{i})s::text[]) ORDER BY kind, dst LIMIT %(n)s) s"
    " UNION ALL"
    " SELECT {i}, s.dst, s.src, NULL::bigint, CASE s.kind WHEN 'next' THEN 'previous' ELSE s.kind END,"
    " s.weight::float8, NULL::bigint"
    " FROM unnest(%(ids{i})b::uuid[]) AS q(id)"
    " CROSS JOIN LATERAL (SELECT src, dst, kind, weight FROM memory_links"
    "   WHERE dst = q.id AND kind = ANY(%(kinds{i})s::text[]) ORDER BY kind, src LIMIT %(n)s) s",
    "mentions": "SELECT {i}, me.memory_id, NULL::uuid, me.entity_id, NULL::text, NULL::float8,"
    f" {_MENTIONS_UP_TO.format(entity='me.entity_id')}"
    " FROM memory_entities me WHERE me.memory_id = ANY(%(ids{i})b::uuid[])",
    # Counted once per entity: OFFSET 0 keeps the planner from pulling the count into the join,
    # where it ran once per member (about ten times slower for a handful of entities).
    "members": "SELECT {i}, s.memory_id, NULL::uuid, q.id, NULL::text, NULL::float8, q.n"
    f" FROM (SELECT e.id, {_MENTIONS_UP_TO.format(entity='e.id')} AS n"
    "       FROM unnest(%(ids{i})s::bigint[]) AS e(id) OFFSET 0) AS q"
    " CROSS JOIN LATERAL (SELECT me.memory_id FROM memory_entities me"
    "   JOIN memories m ON m.id = me.memory_id"
    "   WHERE me.entity_id = q.id AND m.project = %(project)s"
    "     AND (m.expires_at IS NULL OR m.expires_at > now())"
    "   ORDER BY me.memory_id LIMIT %(n)s) s",
}


class GraphReadQueries(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    @read_again_once
    async def entity_ids(self, project: str, keys: list[str]) -> dict[int, str]:
        """Entity nodes for these keys (and for a lone first name, the one full name it starts)."""
        if not keys:
            return {}
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT id, key FROM memlane_entities WHERE project = %(p)s AND key = ANY(%(k)s)"
                " UNION SELECT e.id, e.key FROM memlane_entities e"
                "  JOIN unnest(%(k)s::text[]) AS q(first) ON e.key LIKE q.first || ' %%'"
                "  WHERE e.project = %(p)s AND e.kind = 'name' AND position(' ' in q.first) = 0",
                {"p": project, "k": keys},
                binary=True,
            )
            return {i: k for i, k in await cur.fetchall()}

    @read_again_once
    async def graph_reads(
        self, reads: list[GraphRead], *, project: str = "", per_node: int = 50, count_up_to: int = 201
    ) -> list[list[tuple[Any, ...]]]:
        """Several reads of the graph arm in one statement (one round trip for a whole hop of every
        meta-path), each read's rows in its own shape: ``edges``
        (from, to, kind, weight), ``mentions`` (memory, entity, mentions), ``members`` (entity,
        memory, mentions). ``per_node``: links read per memory and members per entity; entity
        members are the live memories of ``project``; mentions are counted up to ``count_up_to``."""
        out: list[list[tuple[Any, ...]]] = [[] for _ in reads]
        parts: list[str] = []
        params: dict[str, Any] = {"project": project, "n": per_node, "cap": count_up_to}
        for i, read in enumerate(reads):
            if read.ids:
                params[f"ids{i}"], params[f"kinds{i}"] = list(read.ids), list(read.kinds)
                parts.append(_READ_SQL[read.what].format(i=i))
        if not parts:
            return out
        async with self._connection() as conn:
            cur = await conn.execute(" UNION ALL ".join(f"({p})" for p in parts), params, binary=True)
            rows = await cur.fetchall()
        for i, a, b, e, kind, w, n in rows:
            what = reads[i].what
            if what == "edges":
                out[i].append((a, b, kind, float(w)))
            elif what == "mentions":
                out[i].append((a, e, int(n)))
            else:
                out[i].append((e, a, int(n)))
        return out

    async def memory_edges(
        self, ids: list[UUID], kinds: tuple[str, ...] = EDGE_KINDS, per_node: int = 50
    ) -> list[tuple[UUID, UUID, str, float]]:
        """Links touching these memories, both directions: (from, to, kind, weight), where a link
        read backwards keeps its kind ("next" read backwards is "previous")."""
        [rows] = await self.graph_reads([GraphRead("edges", tuple(ids), tuple(kinds))], per_node=per_node)
        return rows

    # -- recall output extras -------------------------------------------------------------------

    async def context_of(self, ids: list[UUID]) -> dict[UUID, list[tuple[UUID, str, int | None]]]:
        """Each memory's ``previous`` then ``next`` neighbours: (id, content, position)."""
        if not ids:
            return {}
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT l.dst AS anchor, m.id, m.content, m.position, 0 AS side FROM memory_links l"
                " JOIN memories m ON m.id = l.src WHERE l.kind = 'next' AND l.dst = ANY(%(ids)s)"
                "   AND (m.expires_at IS NULL OR m.expires_at > now())"
                " UNION ALL"
                " SELECT l.src, m.id, m.content, m.position, 1 FROM memory_links l"
                " JOIN memories m ON m.id = l.dst WHERE l.kind = 'next' AND l.src = ANY(%(ids)s)"
                "   AND (m.expires_at IS NULL OR m.expires_at > now())"
                " ORDER BY 1, 5, 4, 2",
                {"ids": ids},
            )
            out: dict[UUID, list[tuple[UUID, str, int | None]]] = defaultdict(list)
            for anchor, mid, content, position, _ in await cur.fetchall():
                out[anchor].append((mid, content, position))
        return dict(out)

    async def entity_facts(
        self, ids: list[UUID], *, max_entities: int, per_entity: int, max_degree: int
    ) -> list[tuple[str, list[str]]]:
        """The entities these memories mention most (a speaker's name, mentioned everywhere, is
        left out) and, for each, the latest other memories that mention it: (name, [content])."""
        if not ids:
            return []
        async with self._connection() as conn:
            cur = await conn.execute(
                "WITH ents AS (SELECT entity_id, count(*) AS hits FROM memory_entities"
                "   WHERE memory_id = ANY(%(ids)s) GROUP BY entity_id),"
                " ranked AS (SELECT e.id, e.name, ents.hits,"
                "   (SELECT count(*) FROM memory_entities d WHERE d.entity_id = e.id) AS degree"
                "   FROM ents JOIN memlane_entities e ON e.id = ents.entity_id),"
                " top AS (SELECT * FROM ranked WHERE degree > 1 AND degree <= %(maxdeg)s"
                "   ORDER BY hits DESC, degree, name LIMIT %(n)s)"
                " SELECT top.name, f.content FROM top CROSS JOIN LATERAL ("
                "   SELECT m.content FROM memory_entities me JOIN memories m ON m.id = me.memory_id"
                "    WHERE me.entity_id = top.id AND NOT (me.memory_id = ANY(%(ids)s))"
                "      AND (m.expires_at IS NULL OR m.expires_at > now())"
                "    ORDER BY coalesce(m.occurred_at, m.created_at) DESC, m.id LIMIT %(per)s) f"
                " ORDER BY top.hits DESC, top.degree, top.name",
                {"ids": ids, "maxdeg": max_degree, "n": max_entities, "per": per_entity},
            )
            out: dict[str, list[str]] = {}
            for name, content in await cur.fetchall():
                out.setdefault(name, []).append(content)
        return list(out.items())
