"""Queries against the memories table. Async psycopg 3 with a connection pool."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from ..errors import InvalidInput, ModelMismatch, NotFound, StoreError
from ..records import Memory
from . import migrate as migrations
from .handles import HandleQueries
from .rows import MEMORY_COLUMNS, row_to_memory
from .search import SearchQueries

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class StoredRow:
    """What to insert: validated fields plus the embedding."""

    project: str
    content: str
    content_hash: str
    embedding: list[float]
    category: str | None
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    pinned: bool
    priority: int
    occurred_at: datetime | None
    expires_at: datetime | None
    source: str | None


class Store(SearchQueries, HandleQueries):
    def __init__(self, dsn: str, *, pool_min: int = 1, pool_max: int = 8, timeout: float = 30.0) -> None:
        self._dsn = dsn
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._timeout = timeout
        self.pool: AsyncConnectionPool | None = None
        self.schema_version = 0

    async def open(self) -> None:
        try:
            async with await psycopg.AsyncConnection.connect(
                self._dsn, autocommit=True, connect_timeout=int(self._timeout)
            ) as conn:
                await conn.execute("SET client_min_messages = warning")
                self.schema_version = await migrations.migrate(conn)
        except psycopg.OperationalError as e:
            raise StoreError(f"cannot connect to PostgreSQL: {e}".strip()) from e
        except psycopg.errors.FeatureNotSupported as e:  # pragma: no cover - external servers
            raise StoreError(f"the database lacks a feature memlane needs: {e}") from e
        except psycopg.errors.UndefinedFile as e:  # pragma: no cover - external servers
            raise StoreError(
                f"the pgvector extension is not installed on this PostgreSQL server ({e}); install pgvector"
            ) from e
        if self.schema_version > migrations.latest_version():
            raise StoreError(
                f"the database schema is version {self.schema_version}, newer than this memlane knows "
                f"({migrations.latest_version()}): upgrade memlane"
            )

        async def configure(conn: psycopg.AsyncConnection) -> None:
            from pgvector.psycopg import register_vector_async

            await register_vector_async(conn)
            # With a project filter, a plain HNSW scan can return fewer than k rows; pgvector 0.8's
            # iterative scan keeps walking the graph until the filter has enough matches.
            await conn.execute("SET hnsw.iterative_scan = relaxed_order")
            await conn.execute("SET hnsw.ef_search = 100")
            await conn.commit()

        self.pool = AsyncConnectionPool(
            self._dsn,
            min_size=self._pool_min,
            max_size=self._pool_max,
            timeout=self._timeout,
            configure=configure,
            kwargs={"autocommit": True},
            open=False,
        )
        await self.pool.open(wait=True, timeout=self._timeout)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close()
            self.pool = None

    def _pool(self) -> AsyncConnectionPool:
        if self.pool is None:
            raise StoreError("the store is not open")
        return self.pool

    # -- settings -------------------------------------------------------------------------------

    async def get_setting(self, key: str) -> str | None:
        async with self._pool().connection() as conn:
            cur = await conn.execute("SELECT value FROM memlane_settings WHERE key = %s", (key,))
            row = await cur.fetchone()
            return row[0] if row else None

    async def ensure_model(self, model_id: str, dim: int) -> None:
        """Record the embedding model on first use; refuse a different one against stored vectors."""
        async with self._pool().connection() as conn, migrations.schema_lock(conn):
            cur = await conn.execute(
                "SELECT key, value FROM memlane_settings WHERE key IN ('embedding_model', 'embedding_dim')"
            )
            have = dict(await cur.fetchall())
            if have.get("embedding_model") == model_id and have.get("embedding_dim") == str(dim):
                return
            if have:
                cur = await conn.execute("SELECT count(*) FROM memories WHERE embedding IS NOT NULL")
                (n,) = await cur.fetchone()
                if n:
                    raise ModelMismatch(
                        f"the store holds {n} memories embedded with {have.get('embedding_model')} "
                        f"({have.get('embedding_dim')} dimensions) but the configured model is {model_id} "
                        f"({dim}). Run `memlane reembed` to re-embed them with the configured model, or "
                        "configure the recorded model again."
                    )
            await self._set_vector_column(conn, model_id, dim)

    async def _set_vector_column(self, conn: psycopg.AsyncConnection, model_id: str, dim: int) -> None:
        async with conn.transaction():
            await conn.execute("DROP INDEX IF EXISTS memories_embedding_hnsw")
            await conn.execute("UPDATE memories SET embedding = NULL WHERE embedding IS NOT NULL")
            await conn.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
            await conn.execute(
                "CREATE INDEX memories_embedding_hnsw ON memories USING hnsw (embedding vector_cosine_ops)"
            )
            for k, v in (("embedding_model", model_id), ("embedding_dim", str(dim))):
                await conn.execute(
                    "INSERT INTO memlane_settings (key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (k, v),
                )
        log.info("embedding column set to vector(%d) for %s", dim, model_id)

    async def switch_model(self, model_id: str, dim: int) -> None:
        """For reembed: clear every vector and record the new model (under the migration lock)."""
        async with self._pool().connection() as conn, migrations.schema_lock(conn):
            await self._set_vector_column(conn, model_id, dim)

    # -- writes ---------------------------------------------------------------------------------

    async def insert(self, rows: list[StoredRow]) -> list[tuple[UUID, bool]]:
        """Insert a batch in one statement; returns (id, created) per row, in order. An identical
        memory (same project, content and occurred_at) is not stored twice: its existing id comes
        back with created=False. One statement per batch also keeps the BM25 statistics triggers
        deadlock-free (see migration 0002)."""
        if not rows:
            return []
        cols = list(
            zip(
                *(
                    (
                        r.project,
                        r.content,
                        r.content_hash,
                        np.asarray(r.embedding, dtype=np.float32),
                        r.category,
                        Jsonb(list(r.tags)),
                        Jsonb(r.metadata),
                        r.pinned,
                        r.priority,
                        r.occurred_at,
                        r.expires_at,
                        r.source,
                    )
                    for r in rows
                ),
                strict=True,
            )
        )
        sql = (
            "INSERT INTO memories (project, content, content_hash, embedding, category, tags, metadata,"
            " pinned, priority, occurred_at, expires_at, source)"
            " SELECT r.project, r.content, r.content_hash, r.embedding, r.category,"
            " ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.metadata, r.pinned, r.priority,"
            " r.occurred_at, r.expires_at, r.source"
            " FROM unnest(%s::text[], %s::text[], %s::text[], %s::vector[], %s::text[], %s::jsonb[], %s::jsonb[],"
            " %s::bool[], %s::int2[], %s::timestamptz[], %s::timestamptz[], %s::text[]) WITH ORDINALITY"
            " AS r(project, content, content_hash, embedding, category, tags, metadata, pinned, priority,"
            " occurred_at, expires_at, source, ord)"
            " ORDER BY r.ord"
            " ON CONFLICT (project, content_hash) DO NOTHING RETURNING id, project, content_hash"
        )
        async with self._pool().connection() as conn, conn.transaction():
            cur = await conn.execute(sql, [list(c) for c in cols])
            created = {(p, h): i for i, p, h in await cur.fetchall()}
            keys = {(r.project, r.content_hash) for r in rows} - created.keys()
            existing: dict[tuple[str, str], UUID] = {}
            if keys:
                cur = await conn.execute(
                    "SELECT id, project, content_hash FROM memories"
                    " WHERE (project, content_hash) IN (SELECT * FROM unnest(%s::text[], %s::text[]))",
                    ([k[0] for k in keys], [k[1] for k in keys]),
                )
                existing = {(p, h): i for i, p, h in await cur.fetchall()}
        out: list[tuple[UUID, bool]] = []
        for r in rows:
            key = (r.project, r.content_hash)
            if key in created:
                out.append((created.pop(key), True))
                existing[key] = out[-1][0]  # a repeat later in the same batch is a duplicate
            else:
                out.append((existing[key], False))
        return out

    async def update(self, memory_id: UUID, fields: dict[str, Any]) -> Memory:
        if not fields:
            return await self.get(memory_id)
        sets, params = [], []
        for k, v in fields.items():
            if k == "embedding":
                v = np.asarray(v, dtype=np.float32)
            elif k == "metadata":
                v = Jsonb(v)
            elif k == "tags":
                v = list(v)
            sets.append(f"{k} = %s")
            params.append(v)
        sql = f"UPDATE memories SET {', '.join(sets)}, updated_at = now() WHERE id = %s RETURNING {MEMORY_COLUMNS}"
        try:
            return await self._one(sql, (*params, memory_id))
        except psycopg.errors.UniqueViolation as e:
            raise InvalidInput(
                "an identical memory (same project, content and occurred_at) already exists"
            ) from e

    async def delete(self, memory_id: UUID) -> Memory:
        return await self._one(f"DELETE FROM memories WHERE id = %s RETURNING {MEMORY_COLUMNS}", (memory_id,))

    async def touch(self, ids: list[UUID]) -> None:
        """Count an access for memories a recall returned (feeds later scoring adjustments)."""
        if not ids:
            return
        async with self._pool().connection() as conn:
            await conn.execute(
                "UPDATE memories SET access_count = access_count + 1, last_accessed_at = now() WHERE id = ANY(%s)",
                (ids,),
            )

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, memory_id: UUID) -> Memory:
        return await self._one(f"SELECT {MEMORY_COLUMNS} FROM memories WHERE id = %s", (memory_id,))

    async def _one(self, sql: str, params: tuple) -> Memory:
        """Run a statement that returns the row of the memory whose id is the last parameter."""
        async with self._pool().connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params)
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no memory has id {params[-1]}")
        return row_to_memory(row)

    async def iter_memories(
        self, project: str | None = None, batch: int = 500, missing_embedding: bool = False
    ):
        """Every memory (optionally of one project, or only those without a vector), oldest first, in
        batches; for export and reembed. Keyset paging, so rows updated meanwhile are not seen twice."""
        last: tuple[datetime, UUID] | None = None
        while True:
            clauses, params = ["embedding IS NULL"] if missing_embedding else [], []
            if project is not None:
                clauses.append("project = %s")
                params.append(project)
            if last is not None:
                clauses.append("(created_at, id) > (%s, %s)")
                params.extend(last)
            where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
            async with self._pool().connection() as conn:
                cur = await conn.cursor(row_factory=dict_row).execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY created_at, id LIMIT %s",
                    (*params, batch),
                )
                rows = await cur.fetchall()
            if not rows:
                return
            yield [row_to_memory(r) for r in rows]
            last = (rows[-1]["created_at"], rows[-1]["id"])

    async def set_embeddings(self, pairs: list[tuple[UUID, list[float]]]) -> None:
        async with self._pool().connection() as conn, conn.transaction():
            async with conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE memories SET embedding = %s WHERE id = %s",
                    [(np.asarray(v, dtype=np.float32), i) for i, v in pairs],
                )

    async def stats(self) -> dict[str, Any]:
        async with self._pool().connection() as conn:
            cur = await conn.execute(
                "SELECT project, count(*) FROM memories GROUP BY project ORDER BY project"
            )
            per_project = {p: n for p, n in await cur.fetchall()}
            cur = await conn.execute("SELECT key, value FROM memlane_settings")
            settings = dict(await cur.fetchall())
            cur = await conn.execute("SELECT count(*) FROM memories WHERE embedding IS NULL")
            (missing,) = await cur.fetchone()
        return {
            "memories": sum(per_project.values()),
            "projects": per_project,
            "embedding_model": settings.get("embedding_model"),
            "embedding_dim": int(settings["embedding_dim"]) if "embedding_dim" in settings else None,
            "missing_embeddings": missing,
            "schema_version": self.schema_version,
        }
