"""Writes of memories: insert a batch, update, delete, count accesses, set vectors. Each call is one
transaction, so a write whose connection dies is stored whole or not at all."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Collection
from datetime import datetime
from typing import Any
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from memlane.pipeline.errors import InvalidInput, NotFound, StoreError
from memlane.pipeline.records import Memory
from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.connection import count_again_once
from memlane.pipeline.store.graph import LinkPlanner, unlink_content, write_links
from memlane.pipeline.store.rows import (
    INSERT,
    MEMORY_COLUMNS,
    UPDATABLE,
    StoredRow,
    insert_params,
    row_to_memory,
    update_param,
)
from memlane.pipeline.store.topics import TopicSums, add_to_sums, upsert_topic_sums
from memlane.pipeline.validate import content_hash

# pg_advisory_xact_lock(class, hashtext(project)): the writes of one project take turns (see _serialise_writes).
WRITE_LOCK_CLASS = 0x6D6C77
# The fields whose change keeps the memory's previous state as a version (memory_versions).
VERSIONED = frozenset({"content", "occurred_at", "category", "tags", "metadata"})


async def write_passages(
    conn: psycopg.AsyncConnection, items: list[tuple[UUID, str, tuple[Any, ...]]]
) -> None:
    """Passages (memory id, its project, its passages' vectors in order) in one INSERT, the vectors
    in pgvector's binary form."""
    ids: list[UUID] = []
    parts: list[int] = []
    projects: list[str] = []
    vecs: list[Any] = []
    for mid, project, passages in items:
        for i, v in enumerate(passages, start=1):
            ids.append(mid)
            parts.append(i)
            projects.append(project)
            vecs.append(update_param("embedding", v))
    if ids:
        await conn.execute(
            "INSERT INTO memory_passages (memory_id, part, project, embedding)"
            " SELECT * FROM unnest(%s::uuid[], %s::int2[], %s::text[], %b::vector[])",
            (ids, parts, projects, vecs),
        )


def created_passages(
    rows: list[StoredRow], out: list[tuple[UUID, bool]]
) -> list[tuple[UUID, str, tuple[Any, ...]]]:
    """The passages of the rows a batch created (a duplicate's are the stored memory's already)."""
    items: dict[UUID, tuple[UUID, str, tuple[Any, ...]]] = {}
    for r, (mid, created) in zip(rows, out, strict=True):
        if created and r.passages:
            items.setdefault(mid, (mid, r.project, r.passages))
    return list(items.values())


async def replace_passages(
    conn: psycopg.AsyncConnection, items: list[tuple[UUID, str, tuple[Any, ...]]]
) -> None:
    """Memories' passages made again (their content or the model changed): (memory id, project,
    vectors) each, the old ones deleted."""
    await conn.execute("DELETE FROM memory_passages WHERE memory_id = ANY(%s)", ([i[0] for i in items],))
    await write_passages(conn, items)


class Writes(StorePart):
    """Mixed into Store; needs ``_connection()``, ``_check_model`` (model.py), ``index_projects``
    (vectors.py) and ``get`` (reads.py)."""

    async def insert(
        self,
        rows: list[StoredRow],
        *,
        model_id: str | Collection[str] | None = None,
        links: LinkPlanner | None = None,
    ) -> list[tuple[UUID, bool]]:
        """Insert a batch in one transaction; returns (id, created) per row, in order. An identical
        memory (same project, content and occurred_at) is not stored twice: its existing id comes
        back with created=False. ``model_id``: the model that made the vectors; refused if the
        store's recorded model is another one (``memlane reembed`` ran meanwhile). ``links``: asked,
        once the ids are known, which entities and links the created rows get (graph.py)."""
        if not rows:
            return []

        async def whole() -> AsyncIterator[tuple[list[int], list[StoredRow]]]:
            yield list(range(len(rows))), rows

        return await self.insert_chunks(
            whole(), len(rows), dict(Counter(r.project for r in rows)), model_id=model_id, links=links
        )

    async def insert_chunks(
        self,
        chunks: AsyncIterator[tuple[list[int], list[StoredRow]]],
        n: int,
        projects: dict[str, int],
        *,
        model_id: str | Collection[str] | None = None,
        links: LinkPlanner | None = None,
    ) -> list[tuple[UUID, bool]]:
        """``insert`` for a batch of ``n`` rows that arrive in parts, each with the batch positions
        of its rows (``projects``: every project of the batch, with its number of rows): one
        transaction, opened when the first part is there and committed after the last, so the
        batch is stored whole or not at all, and a part is written while the next is still being
        prepared (embedded). Returns (id, created) per row, in batch order; ``links`` are asked
        after the last part, with the rows in batch order. Each part is one INSERT statement; the
        project's write turn (``_serialise_writes``), taken first for all of the batch's projects,
        keeps its BM25 statistics triggers (migration 0002) deadlock-free over several."""
        parts = aiter(chunks)
        try:
            first = await anext(parts)
        except StopAsyncIteration:
            return []
        await self.index_projects(projects)
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes(conn, list(projects))
            if model_id is not None:
                await self._check_model(conn, model_id)
            ids: dict[tuple[str, str], tuple[UUID, bool]] = {}
            placed: list[StoredRow | None] = [None] * n
            part: tuple[list[int], list[StoredRow]] | None = first
            while part is not None:
                positions, rows = part
                if any(r.sequence and r.position is None for r in rows):
                    rows = await self._continue_sequences(conn, rows)
                for i, r in zip(positions, rows, strict=True):
                    placed[i] = r
                await self._insert_part(conn, rows, ids)
                part = await anext(parts, None)
            batch = [r for r in placed if r is not None]
            if len(batch) != n:
                raise StoreError("a batch was stored without all of its rows; nothing was stored")
            if any(r.auto_topics for r in batch):
                await self._add_to_topics(conn, batch, ids)
            out: list[tuple[UUID, bool]] = []
            seen: set[tuple[str, str]] = set()
            for r in batch:
                key = (r.project, r.content_hash)
                mid, created = ids[key]
                out.append((mid, created and key not in seen))  # a repeat later in the batch is a duplicate
                seen.add(key)
            await write_passages(conn, created_passages(batch, out))
            if links is not None:  # the graph, in the same transaction: stored whole or not at all
                plan = links.after_insert(batch, out)
                await write_links(conn, plan.items, plan.settings, plan.chain)
        return out

    async def _insert_part(
        self,
        conn: psycopg.AsyncConnection,
        rows: list[StoredRow],
        ids: dict[tuple[str, str], tuple[UUID, bool]],
    ) -> None:
        """One INSERT of rows, their ids (and whether this batch created them) added to ``ids``; a
        row the batch already stored (an earlier part) or the store holds is not inserted again."""
        pending = [r for r in rows if (r.project, r.content_hash) not in ids]
        # A duplicate's row can be deleted between the INSERT that skipped it and the SELECT
        # that looks it up; the rows left without an id are inserted again (a rare second
        # statement in the transaction). Three rounds need two such deletions in a row.
        for _ in range(3):
            if not pending:
                return
            created = await self._insert_rows(conn, pending)
            ids.update({k: (i, True) for k, i in created.items() if k not in ids})
            missing = {(r.project, r.content_hash) for r in pending} - ids.keys()
            if missing:
                ids.update({k: (i, False) for k, i in (await self._ids_of(conn, missing)).items()})
            pending = [r for r in pending if (r.project, r.content_hash) not in ids]
        if pending:
            raise StoreError("memories were deleted while this batch was being stored; retry")

    @staticmethod
    async def _insert_rows(
        conn: psycopg.AsyncConnection, rows: list[StoredRow]
    ) -> dict[tuple[str, str], UUID]:
        # %b (rows.INSERT): a list of vectors goes in pgvector's binary format. psycopg sends a list
        # in text by default, and printing a batch's floats as decimals cost about 50 times the
        # binary form (the same holds for the other vector[] parameters: nearest_many, the topic sums).
        cur = await conn.execute(INSERT, insert_params(rows))
        return {(p, h): i for i, p, h in await cur.fetchall()}

    @staticmethod
    async def _add_to_topics(
        conn: psycopg.AsyncConnection, rows: list[StoredRow], ids: dict[tuple[str, str], tuple[UUID, bool]]
    ) -> None:
        """Add the embeddings of the rows this batch created (not its duplicates) to the centroids
        of the automatic topics they joined, creating the new ones: one UPSERT."""
        sums: TopicSums = {}
        seen: set[tuple[str, str]] = set()
        for r in rows:
            key = (r.project, r.content_hash)
            if ids[key][1] and key not in seen and r.auto_topics:
                seen.add(key)
                add_to_sums(sums, r.project, r.embedding, r.auto_topics)
        await upsert_topic_sums(conn, sums)

    @staticmethod
    async def _ids_of(
        conn: psycopg.AsyncConnection, keys: set[tuple[str, str]]
    ) -> dict[tuple[str, str], UUID]:
        cur = await conn.execute(
            "SELECT id, project, content_hash FROM memories"
            " WHERE (project, content_hash) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
            ([k[0] for k in keys], [k[1] for k in keys]),
        )
        return {(p, h): i for i, p, h in await cur.fetchall()}

    @staticmethod
    async def _continue_sequences(conn: psycopg.AsyncConnection, rows: list[StoredRow]) -> list[StoredRow]:
        """The rows that continue their source's sequence get its next position (see
        ``StoredRow.sequence``); one that comes after a gap gets last + 2, so the ``next`` links,
        which join consecutive positions, start a new segment. Read under the project's write lock
        (``_serialise_writes``), so two writers cannot take the same position; one indexed read per
        source (``memories_source_position``)."""
        last: dict[tuple[str, str], tuple[int, float, float]] = {}  # (project, source) -> position, ...
        out = []
        for r in rows:
            if not r.sequence or r.position is not None or r.source is None:
                out.append(r)
                continue
            key = (r.project, r.source)
            if key not in last:
                cur = await conn.execute(
                    "SELECT position, extract(epoch FROM now() - created_at),"
                    " extract(epoch FROM coalesce(%s, now()) - coalesce(occurred_at, created_at))"
                    " FROM memories WHERE project = %s AND source = %s AND position IS NOT NULL"
                    " ORDER BY position DESC LIMIT 1",
                    (r.occurred_at, r.project, r.source),
                )
                found = await cur.fetchone()
                last[key] = (int(found[0]), float(found[1]), float(found[2])) if found else (-1, 0.0, 0.0)
            position, stored_ago, apart = last[key]
            gap = r.sequence_gap_s
            if position < 0:
                nxt = 0
            elif gap is None or (stored_ago <= gap and abs(apart) <= gap):
                nxt = position + 1
            else:
                nxt = position + 2
            # The batch's later rows follow this one (stored now, at this occurred_at).
            last[key] = (nxt, 0.0, 0.0)
            out.append(r.at(nxt))
        return out

    @staticmethod
    async def _serialise_writes(conn: psycopg.AsyncConnection, projects: list[str]) -> None:
        """Writes of one project take turns from their first statement. They take turns anyway on
        the project's BM25 statistics row (the triggers of migration 0002), but only after their
        UPDATE has locked the memory row; a write that then waits on another memory's row could
        wait for a writer that waits for the statistics row: a deadlock. Deletions take the same
        turns: the graph's links have no foreign key (migration 0010), so a link written beside a
        deletion of the memory it names would outlive it. Transaction-scoped advisory locks, in
        name order."""
        for project in sorted(set(projects)):
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (WRITE_LOCK_CLASS, project))

    @classmethod
    async def _serialise_writes_of(cls, conn: psycopg.AsyncConnection, ids: list[UUID]) -> None:
        """``_serialise_writes`` for the projects of these memories (an update's, a deletion's),
        before any of their rows is locked, as writers take the turns first."""
        cur = await conn.execute("SELECT DISTINCT project FROM memories WHERE id = ANY(%s)", (list(ids),))
        await cls._serialise_writes(conn, [r[0] for r in await cur.fetchall()])

    async def update(
        self,
        memory_id: UUID,
        fields: dict[str, Any],
        *,
        model_id: str | Collection[str] | None = None,
        links: LinkPlanner | None = None,
        passages: tuple[Any, ...] | None = None,
    ) -> Memory:
        """Set some columns of one memory in one transaction (``passages``: the vectors of new
        content's later parts, replacing the old ones). New content or occurred_at gets a new
        content hash computed from the row as locked here, so a concurrent update of the other field
        cannot leave a stale hash."""
        unknown = set(fields) - UPDATABLE
        if unknown:
            raise ValueError(f"Store.update cannot set {sorted(unknown)}")
        if not fields:
            return await self.get(memory_id)
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes_of(conn, [memory_id])
            if "embedding" in fields and model_id is not None:
                await self._check_model(conn, model_id)
            fields = dict(fields)
            if "content" in fields or "occurred_at" in fields:
                locked = await conn.execute(
                    "SELECT content, occurred_at FROM memories WHERE id = %s FOR NO KEY UPDATE", (memory_id,)
                )
                old = await locked.fetchone()
                if old is None:
                    raise NotFound(f"no memory has id {memory_id}")
                old_content: str = old[0]
                old_occurred_at: datetime | None = old[1]
                fields["content_hash"] = content_hash(
                    fields.get("content", old_content), fields.get("occurred_at", old_occurred_at)
                )
            if VERSIONED & fields.keys():
                # The memory as it was: kept as its next version, never overwritten (migration 0013).
                await conn.execute(
                    "INSERT INTO memory_versions (memory_id, version, content, occurred_at, category, tags, metadata)"
                    " SELECT m.id, coalesce((SELECT max(version) FROM memory_versions WHERE memory_id = m.id), 0) + 1,"
                    " m.content, m.occurred_at, m.category, m.tags, m.metadata FROM memories m WHERE m.id = %s",
                    (memory_id,),
                )
            sets = [f"{k} = %s" for k in fields]
            params = [update_param(k, v) for k, v in fields.items()]
            sql = (
                f"UPDATE memories SET {', '.join(sets)}, updated_at = now() WHERE id = %s"
                f" RETURNING {MEMORY_COLUMNS}"
            )
            try:
                cur = await conn.cursor(row_factory=dict_row).execute(sql, (*params, memory_id))
            except psycopg.errors.UniqueViolation as e:
                raise InvalidInput(
                    "an identical memory (same project, content and occurred_at) already exists"
                ) from e
            row = await cur.fetchone()
            if row is not None and passages is not None:
                await replace_passages(conn, [(memory_id, row["project"], passages)])
            if row is not None and links is not None and ("content" in fields or "occurred_at" in fields):
                # New content or date: its entities, relates_to and same_time links are made again.
                await unlink_content(conn, memory_id)
                plan = links.after_update(memory_id, row["project"], row["content"])
                await write_links(conn, plan.items, plan.settings, plan.chain)
        if row is None:
            raise NotFound(f"no memory has id {memory_id}")
        return row_to_memory(row)

    async def delete(self, memory_id: UUID) -> Memory:
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes_of(conn, [memory_id])
            cur = await conn.cursor(row_factory=dict_row).execute(
                f"DELETE FROM memories WHERE id = %s RETURNING {MEMORY_COLUMNS}", (memory_id,)
            )
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no memory has id {memory_id}")
        return row_to_memory(row)

    async def delete_projects(self, projects: list[str]) -> int:
        """Delete every memory of these projects (their statistics go with them); returns the count."""
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes(conn, projects)
            cur = await conn.execute("DELETE FROM memories WHERE project = ANY(%s)", (projects,))
            # Their automatic topics and category summaries go too (migration 0007).
            await conn.execute("DELETE FROM memlane_topics WHERE project = ANY(%s)", (projects,))
            await conn.execute("DELETE FROM category_summaries WHERE project = ANY(%s)", (projects,))
            # Their mentions and links went with the memories (migration 0010's trigger); the entities too.
            await conn.execute("DELETE FROM memlane_entities WHERE project = ANY(%s)", (projects,))
            return cur.rowcount

    @count_again_once
    async def count_accesses(self, ids: list[UUID]) -> None:
        """Count an access for memories a recall returned (for later scoring adjustments). Kept in
        its own table (migration 0003): an UPDATE of ``memories`` on every recall would write the
        rows the keyword index and the BM25 statistics trigger read. Upserts in id order, so two
        recalls touching the same memories take their locks in one order."""
        if not ids:
            return
        async with self._connection() as conn:
            await conn.execute(
                "INSERT INTO memory_access AS a (memory_id, access_count, last_accessed_at)"
                " SELECT m.id, 1, now() FROM memories m WHERE m.id = ANY(%s) ORDER BY m.id"
                " ON CONFLICT (memory_id) DO UPDATE"
                " SET access_count = a.access_count + 1, last_accessed_at = excluded.last_accessed_at",
                (list(ids),),
            )

    async def set_embeddings(
        self,
        pairs: list[tuple[UUID, list[float]]],
        *,
        model_id: str | Collection[str] | None = None,
        passages: list[tuple[UUID, str, tuple[Any, ...]]] | None = None,
    ) -> None:
        """Set memories' vectors; ``passages`` (memory id, project, vectors): those memories'
        passages made again."""
        async with self._connection() as conn, conn.transaction():
            if model_id is not None:
                await self._check_model(conn, model_id)
            async with conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE memories SET embedding = %s WHERE id = %s",
                    [(update_param("embedding", v), i) for i, v in pairs],
                )
            if passages is not None:
                await replace_passages(conn, passages)
