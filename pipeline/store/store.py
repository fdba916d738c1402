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

log = logging.getLogger(__name__)

MEMORY_COLUMNS = (
    "id, project, content, category, tags, metadata, pinned, priority, occurred_at, created_at, "
    "updated_at, expires_at, source, access_count, last_accessed_at"
)

# The query as BM25 needs it: its distinct lexemes with their idf in the project, the project's
# average memory length, and the tsquery that selects candidates.
# - The tsquery ORs the lexemes: natural questions rarely have all their words in one memory, and
#   AND semantics (plainto_tsquery) reaches R@5 0.095 against 0.524 for OR on the LoCoMo
#   development set (shared/docs/EVAL.md).
# - It leaves out lexemes that more than a share (recall.keyword_common_df) of the project's memories contain (always
#   keeping the rarest): they would make nearly every memory a candidate, so the keyword arm would
#   score the whole project (246 ms at 60k memories). They still count in the score of the
#   memories the other lexemes select. On the development set, leaving out lexemes over 5% changes
#   R@5 by -0.001 and R@20 by +0.003.
# - Lexemes are quoted (backslashes dropped, quotes doubled) so none is read as an operator.
QUERY_CTES = r"""
qlex AS (
    SELECT DISTINCT lx FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(q)s))) AS lx
),
ps AS (
    SELECT coalesce(max(p.docs), 0) AS docs,
           coalesce(max(p.lexemes::float8 / nullif(p.docs, 0)), 1.0) AS avgdl
      FROM memlane_projects p WHERE p.project = %(project)s
),
qstat AS (
    SELECT qlex.lx, coalesce(l.df, 0) AS df, ps.docs, ps.avgdl,
           ln(1 + (ps.docs - coalesce(l.df, 0) + 0.5) / (coalesce(l.df, 0) + 0.5)) AS idf,
           rank() OVER (ORDER BY coalesce(l.df, 0)) AS rarity
      FROM qlex CROSS JOIN ps
      LEFT JOIN memlane_lexemes l ON l.project = %(project)s AND l.lexeme = qlex.lx
),
qidf AS (
    SELECT array_agg(lx ORDER BY lx) AS lexemes,
           array_agg(idf ORDER BY lx) AS idfs,
           coalesce(string_agg('''' || replace(replace(lx, '\', ''), '''', '''''') || '''', ' | ')
                        FILTER (WHERE df <= %(common_df)s * docs OR rarity = 1),
                    '')::tsquery AS tq,
           coalesce(max(avgdl), 1.0) AS avgdl
      FROM qstat
)"""

BM25 = "memlane_bm25(m.tsv, qidf.lexemes, qidf.idfs, qidf.avgdl)"


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


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved memory, its score on every arm (cosine similarity, BM25) and the arms whose top k
    it was in."""

    memory: Memory
    scores: dict[str, float]
    found_by: tuple[str, ...]


def row_to_memory(r: dict[str, Any]) -> Memory:
    return Memory(
        id=r["id"],
        project=r["project"],
        content=r["content"],
        category=r["category"],
        tags=tuple(r["tags"] or ()),
        metadata=r["metadata"] or {},
        pinned=r["pinned"],
        priority=r["priority"],
        occurred_at=r["occurred_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        expires_at=r["expires_at"],
        source=r["source"],
        access_count=r["access_count"],
        last_accessed_at=r["last_accessed_at"],
    )


class Store:
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
        async with self._pool().connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (migrations.ADVISORY_LOCK_KEY,))
            try:
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
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (migrations.ADVISORY_LOCK_KEY,))

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
        async with self._pool().connection() as conn:
            await conn.execute("SELECT pg_advisory_lock(%s)", (migrations.ADVISORY_LOCK_KEY,))
            try:
                await self._set_vector_column(conn, model_id, dim)
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (migrations.ADVISORY_LOCK_KEY,))

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

    @staticmethod
    def _where(project, query, k, category, tags, common_df) -> tuple[str, dict[str, Any]]:
        filters = ["m.project = %(project)s", "(m.expires_at IS NULL OR m.expires_at > now())"]
        params: dict[str, Any] = {"project": project, "q": query, "k": k, "common_df": common_df}
        if category is not None:
            filters.append("m.category = %(category)s")
            params["category"] = category
        if tags:
            filters.append("m.tags @> %(tags)s")
            params["tags"] = list(tags)
        return " AND ".join(filters), params

    @staticmethod
    def _keyword_cte(where: str) -> str:
        return (
            f"kw AS (SELECT m.id FROM memories m, qidf WHERE {where} AND m.tsv @@ qidf.tq"
            f" ORDER BY {BM25} DESC, m.content_hash LIMIT %(k)s)"
        )

    async def keyword_candidates(
        self,
        *,
        project: str,
        query: str,
        k: int,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        common_df: float = 0.05,
    ) -> list[UUID]:
        """The keyword arm alone: ids of the top k memories by BM25. Needs no embedding, so recall
        runs it while the query is being embedded."""
        where, params = self._where(project, query, k, category, tags, common_df)
        sql = f"WITH {QUERY_CTES}, {self._keyword_cte(where)} SELECT id FROM kw"
        async with self._pool().connection() as conn:
            cur = await conn.execute(sql, params)
            return [r[0] for r in await cur.fetchall()]

    async def search(
        self,
        *,
        project: str,
        query: str,
        embedding: list[float] | None,
        k: int,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        arms: tuple[str, ...] = ("vector", "keyword"),
        common_df: float = 0.05,
        keyword_ids: list[UUID] | None = None,
    ) -> list[Hit]:
        """Run the vector arm (top k by cosine) and the keyword arm (top k by BM25; or take its result,
        ``keyword_ids``, from keyword_candidates), then score every candidate of either arm on both:
        exact scores for the union let fusion weigh a memory that the other arm ranked just outside
        its top k."""
        where, params = self._where(project, query, k, category, tags, common_df)
        ctes, arm_ids = [QUERY_CTES], []
        use_vector = "vector" in arms and embedding is not None
        use_keyword = "keyword" in arms
        if use_vector:
            params["emb"] = np.asarray(embedding, dtype=np.float32)
            ctes.append(
                "vec AS (SELECT m.id FROM memories m"
                f" WHERE {where} AND m.embedding IS NOT NULL ORDER BY m.embedding <=> %(emb)s, m.content_hash LIMIT %(k)s)"
            )
            arm_ids.append("SELECT id FROM vec")
        if use_keyword:
            if keyword_ids is None:
                ctes.append(self._keyword_cte(where))
            else:
                params["kw_ids"] = keyword_ids
                ctes.append("kw AS (SELECT unnest(%(kw_ids)s::uuid[]) AS id)")
            arm_ids.append("SELECT id FROM kw")
        if not arm_ids:
            return []
        cols = ", ".join("m." + c.strip() for c in MEMORY_COLUMNS.split(","))
        vector_score = "1 - (m.embedding <=> %(emb)s)" if use_vector else "NULL::float8"
        in_vector = "m.id IN (SELECT id FROM vec)" if use_vector else "false"
        in_keyword = "m.id IN (SELECT id FROM kw)" if use_keyword else "false"
        sql = (
            f"WITH {', '.join(ctes)} SELECT {cols}, {BM25} AS keyword_score, {vector_score} AS vector_score,"
            f" {in_vector} AS in_vector, {in_keyword} AS in_keyword"
            f" FROM ({' UNION '.join(arm_ids)}) AS ids JOIN memories m ON m.id = ids.id CROSS JOIN qidf"
        )
        async with self._pool().connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params)
            rows = await cur.fetchall()
        hits = []
        for r in rows:
            scores = {"keyword": float(r["keyword_score"])}
            if r["vector_score"] is not None:
                scores["vector"] = float(r["vector_score"])
            found = tuple(a for a in ("vector", "keyword") if r[f"in_{a}"])
            hits.append(Hit(memory=row_to_memory(r), scores=scores, found_by=found))
        return hits

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
