"""Reads about the stored data as a whole, and a checkpoint: what an operator's tool or a benchmark
asks of a store (its size on disk, which texts a set of projects holds, their first memories with
their vectors) rather than what remember and recall ask. Mixed into ``Store``."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import psycopg


class _Pooled(Protocol):
    """What these queries need of the store: its connections (connection.py)."""

    def _connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection[Any]]: ...


class AdminQueries:
    """Mixed into Store; needs ``_connection()``."""

    async def database_size(self: _Pooled) -> int:
        """The bytes the store's database takes on disk (``pg_database_size``): tables, indexes,
        TOAST, everything in it, memlane's or not. For reports of what a store of N memories costs
        (``memlane bench``)."""
        async with self._connection() as conn:
            cur = await conn.execute("SELECT pg_database_size(current_database())")
            row = await cur.fetchone()
        assert row is not None  # (a SELECT without FROM: one row)
        return int(row[0])

    async def checkpoint(self: _Pooled) -> bool:
        """A ``CHECKPOINT``: the changes so far written out to the data files now rather than at the
        server's next one, which would otherwise land in whatever runs then (a benchmark settles a
        store with ``vacuum_analyse`` and this before timing it). False, and nothing done, when the
        role may not (PostgreSQL 15 and later allow superusers and ``pg_checkpoint`` members)."""
        async with self._connection() as conn:
            try:
                await conn.execute("CHECKPOINT", prepare=False)
            except psycopg.errors.InsufficientPrivilege:
                return False
        return True

    async def stored_contents(self: _Pooled, projects: list[str], contents: list[str]) -> set[str]:
        """Which of ``contents`` a memory of ``projects`` holds, word for word, whenever it happened
        (the write path's duplicate test also compares ``occurred_at``: ``content_hash``): a
        benchmark resuming a stopped build skips the texts it stored already."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT content FROM memories WHERE project = ANY(%s) AND content = ANY(%s)",
                (projects, contents),
            )
            return {c for (c,) in await cur.fetchall()}

    async def first_stored(
        self: _Pooled, projects: list[str], limit: int
    ) -> list[tuple[str, list[float] | None]]:
        """The content and embedding (None if it has none yet) of the first ``limit`` memories of
        ``projects``, in the order they were stored (``created_at``, then id): a benchmark resuming
        a kept store takes back the vectors its first memories got from the model."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT content, embedding::real[] FROM memories WHERE project = ANY(%s)"
                " ORDER BY created_at, id LIMIT %s",
                (projects, limit),
            )
            return [(content, vector) for content, vector in await cur.fetchall()]
