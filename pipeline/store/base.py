"""What the store's modules share: ``StorePart``, the base of ``Store``'s parts, and ``one_row``.

``Store`` (``__init__.py``) is composed of parts, one mixin per module, whose queries reach the
other parts' members through ``self``: every query takes its connection from
``Connections._connection()``, a write checks the model (``ModelSettings._check_model``), and so
on. ``StorePart`` declares those members for the type checker, each where the part that defines it
says so, so that every module is checked on its own; at ``Store``, the type checker also checks
each definition against its declaration here. At run time ``StorePart`` is an empty class.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, TypeVar
from uuid import UUID

import psycopg

if TYPE_CHECKING:
    from memlane.pipeline.records import Memory

Row = TypeVar("Row")


class StorePart:
    """The base of every part of ``Store``: what the parts use of one another."""

    if TYPE_CHECKING:
        # connection.py (Connections)
        schema_version: int

        def _connection(self) -> AbstractAsyncContextManager[psycopg.AsyncConnection]: ...

        # model.py (ModelSettings)
        @staticmethod
        async def _check_model(conn: psycopg.AsyncConnection, model_id: str | Collection[str]) -> None: ...

        # writes.py (Writes)
        @staticmethod
        async def _serialise_writes(conn: psycopg.AsyncConnection, projects: list[str]) -> None: ...

        @classmethod
        async def _serialise_writes_of(cls, conn: psycopg.AsyncConnection, ids: list[UUID]) -> None: ...

        # reads.py (Reads)
        async def get(self, memory_id: UUID) -> Memory: ...

        # vectors.py (VectorIndexQueries)
        async def is_indexed(self, conn: psycopg.AsyncConnection, project: str) -> bool: ...

        async def index_projects(self, projects: set[str] | dict[str, int]) -> None: ...

        # scoring.py (ScoringQueries)
        def cancel_background_reads(self) -> None: ...


async def one_row(cur: psycopg.AsyncCursor[Row]) -> Row:
    """The row of a statement that always returns exactly one: an aggregate without GROUP BY, a
    SELECT without FROM, an upsert's RETURNING (psycopg's ``fetchone`` also allows for none)."""
    row = await cur.fetchone()
    assert row is not None, "the statement returns one row"
    return row
