"""Numbered SQL migrations, applied in order at start-up and recorded in ``memlane_migrations``.

Two processes starting on one database at once would race (``CREATE TABLE IF NOT EXISTS`` from two
connections fails with a unique violation in the catalog), so the whole run holds an advisory lock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from importlib import resources

import psycopg

from memlane.pipeline.errors import StoreError
from memlane.pipeline.store.base import one_row

log = logging.getLogger(__name__)

# Any constant shared by every memlane process; "mlane" in ASCII.
ADVISORY_LOCK_KEY = 0x6D6C616E65
# hnsw.iterative_scan (pipeline/store/connection.py) came with pgvector 0.8.0.
PGVECTOR_MIN = (0, 8, 0)


def available() -> list[tuple[int, str, str]]:
    """(version, name, sql) for every packaged migration, in order."""
    out = []
    for entry in resources.files("memlane.pipeline.store").joinpath("migrations").iterdir():
        m = re.fullmatch(r"(\d{4})_([a-z0-9_]+)\.sql", entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    return sorted(out)


def latest_version() -> int:
    return available()[-1][0]


@asynccontextmanager
async def schema_lock(conn: psycopg.AsyncConnection) -> AsyncIterator[psycopg.AsyncConnection]:
    """Hold the advisory lock that serialises every schema change (migrations, the vector column)."""
    await conn.execute("SELECT pg_advisory_lock(%s)", (ADVISORY_LOCK_KEY,))
    try:
        yield conn
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (ADVISORY_LOCK_KEY,))


async def migrate(
    conn: psycopg.AsyncConnection,
    before: Callable[[psycopg.AsyncConnection, int], Awaitable[None]] | None = None,
) -> int:
    """Apply pending migrations; returns the schema version. ``conn`` must be in autocommit mode.
    ``before(conn, version)`` runs under the lock before an existing store is upgraded (the
    automatic backup, store/backup.py); its error stops the upgrade."""
    async with schema_lock(conn):
        await ensure_vector(conn)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS memlane_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        cur = await conn.execute("SELECT coalesce(max(version), 0) FROM memlane_migrations")
        current: int = (await one_row(cur))[0]
        first = current
        if before is not None and 0 < current < latest_version():
            await before(conn, current)
        for version, name, sql in available():
            if version <= current:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO memlane_migrations (version, name) VALUES (%s, %s)", (version, name)
                )
            log.debug("applied migration %04d_%s", version, name)
            current = version
        # One line, not one per migration: a new store is news once, an upgrade each time.
        if current != first:
            if first == 0:
                log.info("created a new store (schema version %d)", current)
            else:
                log.info("upgraded the store's schema from version %d to %d", first, current)
        return current


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


async def ensure_vector(conn: psycopg.AsyncConnection) -> None:
    """Make sure pgvector is there, new enough, before any table is made. The ``vector`` extension
    is not marked trusted, so only a superuser may create it: on a managed service memlane's role
    usually may not, and the error names the statement an administrator runs once."""
    cur = await conn.execute(
        "SELECT extversion, current_database() FROM pg_extension WHERE extname = 'vector'"
    )
    row = await cur.fetchone()
    if row is None:
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except psycopg.errors.InsufficientPrivilege as e:
            cur = await conn.execute("SELECT current_database(), current_user")
            db, user = await one_row(cur)
            raise StoreError(
                f"the pgvector extension is not enabled in database {db!r}, and role {user!r} may not "
                f"create it ({e.diag.message_primary or e}). Ask a superuser (or your provider's admin "
                f"role) to run, once, connected to database {db!r}: CREATE EXTENSION vector; "
                f"(pgvector {'.'.join(map(str, PGVECTOR_MIN))} or newer), then start memlane again"
            ) from e
        cur = await conn.execute(
            "SELECT extversion, current_database() FROM pg_extension WHERE extname = 'vector'"
        )
        row = await one_row(cur)  # created just now
    version, db = row
    if _version(version) < PGVECTOR_MIN:
        raise StoreError(
            f"database {db!r} has pgvector {version}; memlane needs {'.'.join(map(str, PGVECTOR_MIN))} or "
            f"newer (for its iterative HNSW scan). Upgrade the package on the server, then as a superuser "
            f"run in database {db!r}: ALTER EXTENSION vector UPDATE;"
        )
