"""Queries for novelty (nearest stored memories of a batch) and for ``memlane maintain``'s purge and
merge tasks. Mixed into ``Store``; every query goes through ``Store._connection()``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from .rows import MEMORY_COLUMNS, row_to_memory


@dataclass(frozen=True, slots=True)
class MergeProbe:
    """One memory of a merge batch and its nearest neighbours in its project (id, similarity, and
    the neighbour's (created_at, id) ordering key)."""

    id: UUID
    project: str
    key: tuple[datetime, UUID]
    neighbours: tuple[tuple[UUID, float, tuple[datetime, UUID]], ...]


class UpkeepQueries:
    async def nearest_many(
        self, project: str, embeddings: list[list[float]], k: int
    ) -> list[list[tuple[UUID, float]]]:
        """For each vector, its ``k`` nearest unexpired memories of ``project`` as (id, cosine
        similarity), best first: one statement for the whole batch (a LATERAL HNSW scan per vector).
        Not retried on a lost connection, unlike other reads: it is the first statement of a
        remember or an ingest, which then fails whole ("retry the call") as a write does."""
        if not embeddings or k < 1:
            return [[] for _ in embeddings]
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT q.ord, n.id, n.sim FROM unnest(%s::vector[]) WITH ORDINALITY AS q(v, ord)"
                " CROSS JOIN LATERAL ("
                "  SELECT m.id, 1 - (m.embedding <=> q.v) AS sim FROM memories m"
                "  WHERE m.project = %s AND m.embedding IS NOT NULL"
                "    AND (m.expires_at IS NULL OR m.expires_at > now())"
                "  ORDER BY m.embedding <=> q.v LIMIT %s) n"
                " ORDER BY q.ord, n.sim DESC",
                ([np.asarray(e, dtype=np.float32) for e in embeddings], project, k),
            )
            rows = await cur.fetchall()
        out: list[list[tuple[UUID, float]]] = [[] for _ in embeddings]
        for ord_, mid, sim in rows:
            out[ord_ - 1].append((mid, float(sim)))
        return out

    # -- purge ----------------------------------------------------------------------------------

    async def count_expired(self) -> int:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM memories WHERE expires_at <= now()")
            return (await cur.fetchone())[0]

    async def purge_expired(self, batch: int) -> int:
        """Delete up to ``batch`` memories past their ``expires_at``; returns how many. Rows another
        transaction holds are skipped (the next batch or run takes them)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "DELETE FROM memories WHERE id IN (SELECT id FROM memories WHERE expires_at <= now()"
                " ORDER BY expires_at, id LIMIT %s FOR UPDATE SKIP LOCKED)",
                (batch,),
            )
            return cur.rowcount

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
            return (await cur.fetchone())[0]

    async def merge_probes(self, after: tuple[datetime, UUID] | None, batch: int, k: int) -> list[MergeProbe]:
        """The next ``batch`` memories in (created_at, id) order after ``after``, each with its ``k``
        nearest neighbours in its project: one statement."""
        where, params = "", []
        if after is not None:
            where = "AND (created_at, id) > (%s, %s)"
            params = list(after)
        async with self._connection() as conn:
            cur = await conn.execute(
                "WITH b AS (SELECT id, project, created_at, embedding FROM memories"
                f"  WHERE embedding IS NOT NULL {where} ORDER BY created_at, id LIMIT %s)"
                " SELECT b.id, b.project, b.created_at, n.id, n.sim, n.created_at FROM b"
                " LEFT JOIN LATERAL ("
                "  SELECT m.id, 1 - (m.embedding <=> b.embedding) AS sim, m.created_at FROM memories m"
                "  WHERE m.project = b.project AND m.embedding IS NOT NULL AND m.id <> b.id"
                "  ORDER BY m.embedding <=> b.embedding LIMIT %s) n ON true"
                " ORDER BY b.created_at, b.id, n.sim DESC",
                (*params, batch, k),
            )
            rows = await cur.fetchall()
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
        self, survivor: UUID, merged: list[UUID], provenance: Any
    ) -> dict[str, Any] | None:
        """Merge ``merged`` into ``survivor`` in one transaction: the survivor keeps its id, content
        and dates, gains the union of tags, the highest priority, pinned if any was, the latest expiry
        (none if any had none) and ``metadata.merged_from`` (``provenance(rows)`` builds the entries);
        the merged rows are deleted. Rows already gone are skipped; None when nothing was merged."""
        async with self._connection() as conn, conn.transaction():
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
            expiries = [m.expires_at for m in group]
            expires = None if any(e is None for e in expiries) else max(expiries)
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
