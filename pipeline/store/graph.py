"""The memory graph in PostgreSQL (migration 0006): writing entities and links. Reading a bounded
neighbourhood for the graph arm is ``graph_reads.py``.

Links are written in the same transaction as the memories they describe (``Store.insert`` and
``Store.update`` call ``write_links``), so a memory is stored with its entities and links or not at
all; which links a new memory gets is the write path's choice (``LinkPlanner``, implemented by
``pipeline/remember/links.py``), except those found here in SQL. Every rule depends only on the
memory and the memories stored before it (``(created_at, id)`` order), so ``memlane maintain
--task links`` rebuilds the same links for memories that have none (stored before the migration,
or after the graph tables were emptied):

- mentions: the entities ``pipeline/entities.py`` finds in the content, one node per key per project,
  a lone first name resolved to the one known full name that starts with it;
- ``relates_to``: up to ``graph.relates_to_k`` of the nearest earlier memories of the project whose
  cosine similarity is at least ``graph.relates_to_min_similarity`` (weight: the similarity);
- ``next``: between pieces of one ``source`` at consecutive ``position``s, whichever came first;
  also between consecutive memories of one ``remember_many`` batch sharing a source and giving no
  positions (these come only from the write path: nothing stored says what a batch was);
- ``same_time``: up to ``graph.same_time_k`` earlier memories that happened the same UTC day,
  nearest in time first (bounded: a day with 1000 memories does not make 1000^2 links).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import psycopg

from memlane.pipeline.entities import Entity, first_names, resolve_aliases
from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.rows import StoredRow
from memlane.pipeline.store.vectors import has_index, project_is

EXTRACTOR_VERSION = 1
# A handful of neighbours (relates_to links, remember's similar check, maintain's merge probes) needs a
# narrower HNSW search than recall's candidates (ef_search 100).
NEIGHBOUR_EF_SEARCH = 40


async def neighbour_scan(conn: psycopg.AsyncConnection, *, force_index: bool, ef_search: int | None) -> None:
    """Settings, for the transaction, of a LATERAL nearest-neighbour scan per vector: the HNSW index
    forced when ``force_index`` (PostgreSQL's planner would read and sort a project of a few
    thousand memories per vector instead, ~8x slower here), or sorting allowed again when not (the
    setting lasts for the transaction), and ``ef_search`` (None: the session's)."""
    await conn.execute(f"SET LOCAL enable_sort = {'off' if force_index else 'on'}")
    if ef_search is not None:
        await conn.execute(f"SET LOCAL hnsw.ef_search = {int(ef_search)}")


@dataclass(frozen=True, slots=True)
class LinkSettings:
    relates_to_k: int = 5
    relates_to_min_similarity: float = 0.5
    same_time_k: int = 3


@dataclass(slots=True)
class LinkItem:
    """One memory to link: its id, project and the entities found in its content."""

    memory_id: UUID
    project: str
    entities: list[Entity] = field(default_factory=list)
    # Its relates_to targets (id, similarity) when the write path found them already; None: search.
    relates: list[tuple[UUID, float]] | None = None


@dataclass(slots=True)
class LinkRows:
    """The entities and links a write stores, as its planner chose them: written as given."""

    items: list[LinkItem]
    settings: LinkSettings
    chain: list[tuple[UUID, UUID]] = field(default_factory=list)  # ``next`` links between batch rows


class LinkPlanner(Protocol):
    """Chooses the links of the memories a write stores (the write path's ``LinkPlan``,
    ``pipeline/remember/links.py``). ``Store.insert`` and ``Store.update`` call it inside their
    transaction, once the rows' ids are known, and write what it returns."""

    def after_insert(self, rows: list[StoredRow], stored: list[tuple[UUID, bool]]) -> LinkRows:
        """``stored``: (id, created) per row, as ``Store.insert`` returns them."""
        ...

    def after_update(self, memory_id: UUID, project: str, content: str) -> LinkRows:
        """The links of a memory whose content or date changed (its old ones are dropped first)."""
        ...


async def _known_full_names(conn: psycopg.AsyncConnection, items: list[LinkItem]) -> dict[str, list[Entity]]:
    pairs = sorted({(it.project, f) for it in items for f in first_names(it.entities)})
    if not pairs:
        return {}
    cur = await conn.execute(
        "SELECT e.project, e.key, e.name FROM memlane_entities e"
        " JOIN unnest(%s::text[], %s::text[]) AS q(project, first)"
        "   ON e.project = q.project AND e.key LIKE q.first || ' %%'"
        " WHERE e.kind = 'name'",
        ([p for p, _ in pairs], [f for _, f in pairs]),
    )
    out: dict[str, list[Entity]] = defaultdict(list)
    for project, key, name in await cur.fetchall():
        out[project].append(Entity(key, name, "name"))
    return out


async def _write_mentions(conn: psycopg.AsyncConnection, items: list[LinkItem]) -> int:
    known = await _known_full_names(conn, items)
    rows: list[tuple[UUID, str, str, str, str]] = []
    for it in items:
        for e in resolve_aliases(it.entities, known.get(it.project, ())):
            rows.append((it.memory_id, it.project, e.key, e.name, e.kind))
    if not rows:
        return 0
    entities = sorted({(p, k): (p, k, n, kind) for _, p, k, n, kind in rows}.values())
    cols = [list(c) for c in zip(*entities, strict=True)]
    # Sorted, so two batches inserting the same new entities take their locks in one order.
    await conn.execute(
        "INSERT INTO memlane_entities (project, key, name, kind)"
        " SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[])"
        " ON CONFLICT (project, key) DO NOTHING",
        cols,
    )
    cur = await conn.execute(
        "INSERT INTO memory_entities (memory_id, entity_id)"
        " SELECT u.mid, e.id FROM unnest(%s::uuid[], %s::text[], %s::text[]) AS u(mid, project, key)"
        " JOIN memlane_entities e ON e.project = u.project AND e.key = u.key"
        " ORDER BY u.mid, e.id ON CONFLICT DO NOTHING",
        ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
    )
    return cur.rowcount


async def _insert_links(
    conn: psycopg.AsyncConnection, kind: str, links: list[tuple[UUID, UUID, float | None]]
) -> int:
    """Links of one kind from (src, dst, weight) triples (None: the default weight, 1); a link to
    itself, one that exists and one whose target is gone are skipped. Inserted in key order, so
    concurrent writers lock in one order. Returns how many were made."""
    best = {(src, dst): w for src, dst, w in links if src != dst}
    if not best:
        return 0
    pairs = sorted(best)
    cur = await conn.execute(
        "INSERT INTO memory_links (src, dst, kind, weight)"
        " SELECT u.s, u.d, %s, coalesce(u.w, 1.0) FROM unnest(%s::uuid[], %s::uuid[], %s::real[]) AS u(s, d, w)"
        " JOIN memories m ON m.id = u.d ORDER BY 1, 2 ON CONFLICT DO NOTHING",
        (kind, [s for s, _ in pairs], [d for _, d in pairs], [best[p] for p in pairs]),
    )
    return cur.rowcount


async def write_links(
    conn: psycopg.AsyncConnection,
    items: list[LinkItem],
    settings: LinkSettings,
    chain: Sequence[tuple[UUID, UUID]] = (),
) -> dict[str, int]:
    """Entities and links of these memories (already in ``memories``, on ``conn``'s transaction),
    and their ``memory_linked`` marks. Idempotent: links that exist are left as they are."""
    if not items:
        return {}
    ids = [it.memory_id for it in items]
    counts = {"mentions": await _write_mentions(conn, items)}
    # Found before the insert (the write path): a target forgotten since is skipped.
    counts["relates_to"] = await _insert_links(
        conn,
        "relates_to",
        [(it.memory_id, dst, w) for it in items if it.relates is not None for dst, w in it.relates],
    )
    search: dict[str, list[UUID]] = {}
    for it in items:
        if it.relates is None:
            search.setdefault(it.project, []).append(it.memory_id)
    for project, found in search.items():  # one statement per project: it names the project (vectors.py)
        await neighbour_scan(conn, force_index=await has_index(conn, project), ef_search=NEIGHBOUR_EF_SEARCH)
        cur = await conn.execute(
            "INSERT INTO memory_links (src, dst, kind, weight)"
            " SELECT n.id, nb.id, 'relates_to', nb.sim FROM memories n"
            " CROSS JOIN LATERAL ("
            "   SELECT o.id, (1 - (o.embedding <=> n.embedding))::real AS sim FROM memories o"
            f"    WHERE {project_is('o.project', project)} AND o.embedding IS NOT NULL"
            "      AND (o.created_at, o.id) < (n.created_at, n.id)"
            "    ORDER BY o.embedding <=> n.embedding LIMIT %s) nb"
            " WHERE n.id = ANY(%s) AND n.embedding IS NOT NULL AND nb.sim >= %s"
            " ORDER BY 1, 2 ON CONFLICT DO NOTHING",
            (settings.relates_to_k, found, settings.relates_to_min_similarity),
        )
        counts["relates_to"] += cur.rowcount
    if search:  # the statements below sort
        await conn.execute("SET LOCAL enable_sort = on")
    cur = await conn.execute(
        "INSERT INTO memory_links (src, dst, kind)"
        " SELECT a.id, b.id, 'next' FROM memories n"
        " JOIN memories a ON a.project = n.project AND a.source = n.source"
        "  AND a.position IN (n.position - 1, n.position)"
        " JOIN memories b ON b.project = n.project AND b.source = n.source AND b.position = a.position + 1"
        " WHERE n.id = ANY(%s) AND n.source IS NOT NULL AND n.position IS NOT NULL"
        "   AND (a.id = n.id OR b.id = n.id) AND a.id <> b.id"
        " ORDER BY 1, 3 ON CONFLICT DO NOTHING",
        (ids,),
    )
    counts["next"] = cur.rowcount
    counts["next"] += await _insert_links(conn, "next", [(a, b, None) for a, b in chain])
    if settings.same_time_k > 0:
        # The k nearest in time on each side within the day, then the k nearest of those: two
        # index-ordered scans of (project, occurred_at), whatever the size of the day.
        cur = await conn.execute(
            "INSERT INTO memory_links (src, dst, kind)"
            " SELECT n.id, t.id, 'same_time' FROM memories n"
            " CROSS JOIN LATERAL (SELECT d.id FROM ("
            "   (SELECT o.id, o.occurred_at FROM memories o WHERE o.project = n.project"
            "     AND o.occurred_at >= date_trunc('day', n.occurred_at, 'UTC') AND o.occurred_at <= n.occurred_at"
            "     AND (o.created_at, o.id) < (n.created_at, n.id)"
            "     ORDER BY o.occurred_at DESC, o.id LIMIT %(k)s)"
            "   UNION ALL"
            "   (SELECT o.id, o.occurred_at FROM memories o WHERE o.project = n.project"
            "     AND o.occurred_at > n.occurred_at"
            "     AND o.occurred_at < date_trunc('day', n.occurred_at, 'UTC') + interval '1 day'"
            "     AND (o.created_at, o.id) < (n.created_at, n.id)"
            "     ORDER BY o.occurred_at, o.id LIMIT %(k)s)"
            "  ) d ORDER BY abs(extract(epoch FROM d.occurred_at - n.occurred_at)), d.id LIMIT %(k)s) t"
            " WHERE n.id = ANY(%(ids)s) AND n.occurred_at IS NOT NULL"
            " ORDER BY 1, 2 ON CONFLICT DO NOTHING",
            {"k": settings.same_time_k, "ids": ids},
        )
        counts["same_time"] = cur.rowcount
    await conn.execute(
        "INSERT INTO memory_linked (memory_id, version) SELECT unnest(%s::uuid[]), %s"
        " ON CONFLICT (memory_id) DO UPDATE SET version = excluded.version, linked_at = now()",
        (sorted(ids), EXTRACTOR_VERSION),
    )
    return counts


async def unlink_content(conn: psycopg.AsyncConnection, memory_id: UUID) -> None:
    """Drop what a memory's content and date made (mentions, its own relates_to and same_time
    links), before ``write_links`` makes them again for new content. ``next`` links stay: they
    follow the source and position, which an update does not change."""
    await conn.execute("DELETE FROM memory_entities WHERE memory_id = %s", (memory_id,))
    await conn.execute(
        "DELETE FROM memory_links WHERE src = %s AND kind IN ('relates_to', 'same_time')", (memory_id,)
    )


class GraphQueries(StorePart):
    """The graph's writes, and the reads that serve them (maintain, the LLM extractor). Mixed into
    Store; needs ``_connection()``."""

    async def unlinked_ids(
        self, after: tuple[datetime, UUID] | None, limit: int
    ) -> list[tuple[UUID, str, str, datetime]]:
        """Memories without a ``memory_linked`` mark, in (created_at, id) order after ``after`` (a
        (created_at, id) pair): (id, project, content, created_at)."""
        clause = ""
        params: list[Any] = [limit]
        if after is not None:
            clause, params = " AND (m.created_at, m.id) > (%s, %s)", [*after, limit]
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT m.id, m.project, m.content, m.created_at FROM memories m"
                " WHERE NOT EXISTS (SELECT 1 FROM memory_linked l WHERE l.memory_id = m.id)"
                + clause
                + " ORDER BY m.created_at, m.id LIMIT %s",
                params,
            )
            return list(await cur.fetchall())

    async def count_unlinked(self) -> int:
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM memories m"
                " WHERE NOT EXISTS (SELECT 1 FROM memory_linked l WHERE l.memory_id = m.id)"
            )
            count: int = (await one_row(cur))[0]
            return count

    async def link_existing(self, items: list[LinkItem], settings: LinkSettings) -> dict[str, int]:
        """Entities and links for stored memories, in one transaction (maintain). A memory deleted
        meanwhile is skipped; one linked meanwhile is linked again (idempotent). The projects'
        writes and deletions wait meanwhile: the links name other memories, which must stay."""
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes(conn, [it.project for it in items])
            cur = await conn.execute(
                "SELECT id FROM memories WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE",
                ([it.memory_id for it in items],),
            )
            present = {r[0] for r in await cur.fetchall()}
            return await write_links(conn, [it for it in items if it.memory_id in present], settings)

    async def contents(self, ids: list[UUID]) -> dict[UUID, str]:
        if not ids:
            return {}
        async with self._connection() as conn:
            cur = await conn.execute("SELECT id, content FROM memories WHERE id = ANY(%s)", (ids,))
            return dict(await cur.fetchall())

    async def add_extracted(self, items: list[LinkItem], causes: list[tuple[UUID, UUID]]) -> dict[str, int]:
        """What an LLM extractor added: more mentions, and ``causes`` links (cause -> effect), in one
        transaction; memories deleted meanwhile are skipped."""
        ids = sorted({it.memory_id for it in items} | {a for a, _ in causes} | {b for _, b in causes})
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                "SELECT id FROM memories WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE", (ids,)
            )
            present = {r[0] for r in await cur.fetchall()}
            counts = {
                "mentions": await _write_mentions(conn, [it for it in items if it.memory_id in present])
            }
            counts["causes"] = await _insert_links(
                conn, "causes", [(a, b, None) for a, b in causes if a in present and b in present]
            )
        return counts

    async def delete_orphan_entities(self, *, dry_run: bool = False) -> int:
        """Entities no memory mentions any more (forget leaves them to maintain)."""
        async with self._connection() as conn:
            if dry_run:
                cur = await conn.execute(
                    "SELECT count(*) FROM memlane_entities e"
                    " WHERE NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)"
                )
                orphans: int = (await one_row(cur))[0]
                return orphans
            cur = await conn.execute(
                "DELETE FROM memlane_entities e WHERE e.id IN (SELECT e2.id FROM memlane_entities e2"
                " WHERE NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e2.id)"
                " FOR UPDATE SKIP LOCKED)"
                " AND NOT EXISTS (SELECT 1 FROM memory_entities me WHERE me.entity_id = e.id)"
            )
            return cur.rowcount
