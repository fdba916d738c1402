"""Reads of whole memories outside recall: by id, all of them in batches (export, reembed), the
counts ``stats`` shows, the server's versions, and a bare nearest-neighbour query for the benchmark."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
from psycopg.rows import dict_row

from memlane.pipeline.errors import NotFound
from memlane.pipeline.records import Memory
from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.connection import read_again_once
from memlane.pipeline.store.rows import MEMORY_COLUMNS, row_to_memory
from memlane.pipeline.store.vectors import project_is


class Reads(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    @read_again_once
    async def get(self, memory_id: UUID) -> Memory:
        """One memory with its access statistics."""
        return await self._one(
            f"SELECT {MEMORY_COLUMNS}, a.access_count, a.last_accessed_at FROM memories"
            " LEFT JOIN memory_access a ON a.memory_id = memories.id WHERE id = %s",
            (memory_id,),
        )

    async def _one(self, sql: str, params: tuple[Any, ...]) -> Memory:
        """Run a statement that returns the row of the memory whose id is the last parameter."""
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params)
            row = await cur.fetchone()
        if row is None:
            raise NotFound(f"no memory has id {params[-1]}")
        return row_to_memory(row)

    async def iter_memories(
        self, project: str | None = None, batch: int = 500, missing_embedding: bool = False
    ) -> AsyncIterator[list[Memory]]:
        """Every memory (optionally of one project, or only those without a vector), oldest first, in
        batches; for export and reembed. Keyset paging, so rows updated meanwhile are not seen twice."""
        last: tuple[datetime, UUID] | None = None
        while True:
            clauses = ["embedding IS NULL"] if missing_embedding else []
            params: list[Any] = []
            if project is not None:
                clauses.append("project = %s")
                params.append(project)
            if last is not None:
                clauses.append("(created_at, id) > (%s, %s)")
                params.extend(last)
            where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
            async with self._connection() as conn:
                cur = await conn.cursor(row_factory=dict_row).execute(
                    f"SELECT {MEMORY_COLUMNS} FROM memories {where} ORDER BY created_at, id LIMIT %s",
                    (*params, batch),
                )
                rows = await cur.fetchall()
            if not rows:
                return
            yield [row_to_memory(r) for r in rows]
            last = (rows[-1]["created_at"], rows[-1]["id"])

    @read_again_once
    async def sources(self, project: str, prefix: str) -> set[str]:
        """The distinct sources of ``project``'s memories that start with ``prefix`` (memlane import:
        the conversations of an export already ingested), by the (project, source) index."""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT DISTINCT source FROM memories WHERE {project_is('project', project)}"
                " AND source LIKE %s",
                (pattern,),
            )
            return {r[0] for r in await cur.fetchall()}

    @read_again_once
    async def nearest_ids(self, project: str, embedding: list[float], k: int) -> list[UUID]:
        """A bare pgvector top-k on one project: the floor any vector recall must pay (bench)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT id FROM memories WHERE {project_is('project', project)}"
                " ORDER BY embedding <=> %b LIMIT %s",
                (np.asarray(embedding, dtype=np.float32), k),
            )
            return [r[0] for r in await cur.fetchall()]

    @read_again_once
    async def server_info(self) -> dict[str, str | None]:
        """PostgreSQL's and pgvector's versions (doctor, benchmark reports)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT current_setting('server_version'),"
                " (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
            )
            postgres, pgvector = await one_row(cur)
        return {"postgres": postgres, "pgvector": pgvector}

    @read_again_once
    async def stats(self, projects: list[str] | None = None) -> dict[str, Any]:
        """Counts over the whole store, or over ``projects`` only (an access token's)."""
        scope, params = ("", ()) if projects is None else ("WHERE project = ANY(%s)", (list(projects),))
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT project, count(*) FROM memories {scope} GROUP BY project ORDER BY project", params
            )
            per_project = {p: n for p, n in await cur.fetchall()}
            cur = await conn.execute("SELECT key, value FROM memlane_settings")
            settings: dict[str, str] = dict(await cur.fetchall())
            cur = await conn.execute(
                f"SELECT count(*) FROM memories {scope} {'AND' if scope else 'WHERE'} embedding IS NULL",
                params,
            )
            (missing,) = await one_row(cur)
            cur = await conn.execute(f"SELECT count(*) FROM memory_passages {scope}", params)
            (passages,) = await one_row(cur)
        return {
            "memories": sum(per_project.values()),
            "projects": per_project,
            "embedding_model": settings.get("embedding_model"),
            "embedding_dim": int(settings["embedding_dim"]) if "embedding_dim" in settings else None,
            "missing_embeddings": missing,
            "passages": passages,  # the vectors of long memories' parts (remember/passages.py)
            "schema_version": self.schema_version,
        }
