"""Queries against the memories table. Async psycopg 3 with a connection pool.

Every query takes its connection from ``_connection()``, the store's one error boundary: a
connection is checked before use, a database that went away is brought back (``heal``, given for
the embedded server) or reported at once as ``DatabaseUnavailable`` with what to do, and a
connection lost during a call becomes the same error, never a 30 s pool timeout or a raw
psycopg exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from psycopg import sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from memlane.pipeline.errors import (
    ConnectionLost,
    DatabaseUnavailable,
    InvalidInput,
    ModelMismatch,
    NotFound,
    StoreError,
)
from memlane.pipeline.graph.entities import extract as extract_entities
from memlane.pipeline.records import Memory
from memlane.pipeline.store import migrate as migrations
from memlane.pipeline.store import vectors
from memlane.pipeline.store.browse import BrowseQueries
from memlane.pipeline.store.graph import (
    GraphQueries,
    LinkItem,
    LinkPlan,
    unlink_content,
    write_links,
)
from memlane.pipeline.store.handles import HandleQueries
from memlane.pipeline.store.rows import MEMORY_COLUMNS, row_to_memory
from memlane.pipeline.store.scoring import ScoringQueries
from memlane.pipeline.store.search import SearchQueries
from memlane.pipeline.store.topics import TopicQueries, add_to_sums, upsert_topic_sums
from memlane.pipeline.store.upkeep import UpkeepQueries
from memlane.pipeline.store.vectors import VectorIndexQueries, project_is
from memlane.pipeline.validate import content_hash

log = logging.getLogger(__name__)

# pg_advisory_xact_lock(class, hashtext(project)): the writes of one project take turns (see _serialise_writes).
WRITE_LOCK_CLASS = 0x6D6C77

# A healthy pool hands out a connection in well under a millisecond; waiting longer means every
# connection is busy or the pool cannot connect. After this long the store asks the server
# directly (PROBE_TIMEOUT) instead of waiting out the configured timeout on a database that is gone.
ACQUIRE_WAIT = 2.0
# A pooled connection that answered this recently is not checked again before the next call: a
# recall takes it out of the pool up to a dozen times within a few milliseconds (store arms, graph
# hops, scoring), and each check is a round trip. A server lost in that window is still caught,
# by the call itself (reads are retried; a write says it was stored whole or not at all).
CHECK_AFTER_IDLE_S = 0.25
PROBE_TIMEOUT = 3  # seconds, libpq's connect_timeout (an integer, at least 2)
# A server that is starting up or replaying its WAL after a crash refuses connections for a moment
# (about 0.1-1 s for memlane's databases); wait that long rather than report it down.
STARTING_WAIT = 10.0
# psycopg errors that mean the connection, not the statement, failed.
_CONNECTION_ERRORS = (
    psycopg.errors.AdminShutdown,
    psycopg.errors.CrashShutdown,
    psycopg.errors.CannotConnectNow,
    psycopg.errors.IdleSessionTimeout,
    psycopg.InterfaceError,
)
_TRANSIENT = ("starting up", "in recovery mode", "not yet accepting connections")


def _why(e: BaseException) -> str:
    """The server's or libpq's reason, without the socket path preamble: "Connection refused",
    "the database system is shutting down", "terminating connection due to administrator command"."""
    first = (str(e).strip().splitlines() or [""])[0]
    reason = first.rsplit("failed: ", 1)[-1].replace("FATAL:", "").strip()
    return reason or type(e).__name__


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
    position: int | None = None
    topics: tuple[str, ...] | None = None  # None: not assigned (topics off)
    fact_type: str | None = None
    # The automatic topics this row joins, with the key terms a topic gets if this row creates it:
    # their centroids take the row's embedding when the row is created (not for a duplicate).
    auto_topics: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Store(
    SearchQueries,
    HandleQueries,
    BrowseQueries,
    TopicQueries,
    UpkeepQueries,
    ScoringQueries,
    GraphQueries,
    VectorIndexQueries,
):
    def __init__(
        self,
        dsn: str,
        *,
        pool_min: int = 1,
        pool_max: int = 8,
        timeout: float = 30.0,
        heal: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """``heal`` brings a stopped database back (the engine passes one for the embedded server;
        an external server is only reconnected to). It must be safe to call from several processes
        at once."""
        self._dsn = dsn
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._timeout = timeout
        self._heal = heal
        self.pool: AsyncConnectionPool | None = None
        self.schema_version = 0
        # Recovery state: every replacement of the pool bumps the generation, so concurrent calls
        # that hit the same outage recover it once; while down, calls probe instead of waiting.
        self._generation = 0
        self._down = False
        self._recovery = asyncio.Lock()
        self._in_use = 0
        self._answered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # conn -> monotonic
        self._closing: set[asyncio.Task] = set()
        self._indexed: set[str] = set()  # projects known to have their vector index (vectors.py)

    async def open(self) -> None:
        try:
            async with await self._connect(autocommit=True, connect_timeout=int(self._timeout)) as conn:
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
        self.pool = self._new_pool()
        try:
            await self.pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as e:
            await self.close()
            raise StoreError(
                f"cannot connect to PostgreSQL: no connection within {self._timeout:.0f} s"
            ) from e

    async def _connect(self, **kwargs: Any) -> psycopg.AsyncConnection:
        """A direct connection, outside the pool. Cancelled mid-connect (State.close during
        start-up), psycopg's half-made connection stays referenced by the cancelled task's frames
        and open on the server (seen in test_closing_during_start_up_leaves_no_connection_behind):
        let the connect finish, close it, then give in to the cancellation."""
        task = asyncio.ensure_future(psycopg.AsyncConnection.connect(self._dsn, **kwargs))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await (await task).close()
            raise

    @staticmethod
    async def _configure(conn: psycopg.AsyncConnection) -> None:
        from pgvector.psycopg import register_vector_async

        await register_vector_async(conn)
        # With a project filter, a plain HNSW scan can return fewer than k rows; pgvector 0.8's
        # iterative scan keeps walking the graph until the filter has enough matches.
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        await conn.execute("SET hnsw.ef_search = 100")
        await conn.commit()

    def _new_pool(self) -> AsyncConnectionPool:
        return AsyncConnectionPool(
            self._dsn,
            min_size=self._pool_min,
            max_size=self._pool_max,
            timeout=self._timeout,
            configure=self._configure,
            # connect_timeout: without it a pool reconnecting to an unreachable host blocks for the
            # kernel's TCP timeout (minutes), and so would closing the pool.
            kwargs={"autocommit": True, "connect_timeout": max(PROBE_TIMEOUT, int(min(self._timeout, 10)))},
            open=False,
        )

    async def close(self) -> None:
        self.cancel_background_reads()
        if self.pool is not None:
            pool, self.pool = self.pool, None
            await pool.close()
        if self._closing:  # pools replaced after an outage, still closing in the background
            await asyncio.gather(*self._closing, return_exceptions=True)

    def _pool(self) -> AsyncConnectionPool:
        if self.pool is None:
            raise StoreError("the store is not open")
        return self.pool

    # -- the error boundary ---------------------------------------------------------------------

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A checked connection from the pool. A database that went away is recovered before the
        call runs (so the call runs once, on a working connection, and its result is exact). A
        connection lost *during* the call is not retried here, since the statement may have
        committed: the call fails with DatabaseUnavailable once the database is back, and says that
        its changes were stored whole or not at all (every call is one transaction)."""
        conn, pool, generation = await self._acquire()
        self._in_use += 1
        lost: psycopg.Error | None = None
        try:
            yield conn
            self._answered[conn] = time.monotonic()
        except psycopg.Error as e:
            if not (conn.broken or conn.closed or isinstance(e, _CONNECTION_ERRORS)):
                self._answered[conn] = time.monotonic()
                if isinstance(e, psycopg.OperationalError):  # disk full, out of memory, timeouts
                    raise StoreError(f"the database could not run this call: {_why(e)}") from e
                raise  # the statement's own error (a unique violation...): the caller's to handle
            lost = e
        finally:
            self._in_use -= 1
            await pool.putconn(conn)  # a broken one is discarded; one of a replaced pool is closed
        if lost is not None:
            raise await self._lost_during_call(lost, generation) from lost

    async def _acquire(self) -> tuple[psycopg.AsyncConnection, AsyncConnectionPool, int]:
        for _ in range(4):
            generation = self._generation
            pool = self._pool()  # (None only before open or after close: not reopened here)
            if self._down:
                await self._recover(generation)  # raises DatabaseUnavailable while it is down
                continue
            try:
                conn = await pool.getconn(timeout=min(self._timeout, ACQUIRE_WAIT))
            except PoolClosed:
                continue  # replaced by a concurrent recovery
            except PoolTimeout:
                if self._in_use < self._pool_max or await self._probe(wait_for_start=False):
                    await self._recover(generation)  # the pool cannot connect: the server is gone
                    continue
                conn = await self._wait_for_busy_pool(pool)
            answered = self._answered.pop(conn, None)
            if answered is not None and time.monotonic() - answered < CHECK_AFTER_IDLE_S:
                return conn, pool, generation
            try:
                # One round trip (measured 0.12-0.17 ms on the embedded server's socket): a pooled
                # connection may belong to a server that crashed or was restarted since it was last
                # used; this finds out before the call runs, so even a write runs once and reports
                # exactly.
                await conn.execute("")
            except psycopg.Error as e:
                log.warning("a pooled database connection is dead (%s)", _why(e))
                await pool.putconn(conn)
                await self._recover(generation)
                continue
            return conn, pool, generation
        raise DatabaseUnavailable(
            "the database keeps dropping connections right after memlane reconnects; retry in a few seconds"
        )

    async def _wait_for_busy_pool(self, pool: AsyncConnectionPool) -> psycopg.AsyncConnection:
        """Every connection is in use by other calls on a working server: wait as configured."""
        try:
            return await pool.getconn(timeout=max(self._timeout - ACQUIRE_WAIT, 0.1))
        except PoolTimeout as e:
            raise StoreError(
                f"all {self._pool_max} database connections stayed busy for {self._timeout:.0f} s; "
                "retry, or raise database.pool_max"
            ) from e

    async def _probe(self, *, wait_for_start: bool = True) -> str | None:
        """Connect directly, bypassing the pool: None if the server accepts connections, else why
        not. A server that is starting up or recovering from a crash is waited for (bounded)."""
        deadline = time.monotonic() + STARTING_WAIT
        while True:
            try:
                conn = await self._connect(connect_timeout=PROBE_TIMEOUT)
            except psycopg.Error as e:
                why = _why(e)
                if wait_for_start and any(t in why for t in _TRANSIENT) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                    continue
                return why
            await conn.close()
            return None

    async def _recover(self, generation: int) -> bool:
        """Bring the database back (heal) if it is gone, then replace the pool; raises
        DatabaseUnavailable if it stays unreachable. Calls that hit the same outage wait for the
        first one's recovery instead of each restarting the server. True if it healed."""
        healed = False
        async with self._recovery:
            if generation != self._generation and not self._down:
                return healed  # recovered by a concurrent call meanwhile
            why = await self._probe()
            if why is not None:
                # Its connections are dead; closing it also stops it retrying to connect in the
                # background (a warning a second) while the server is down.
                await self._replace_pool(open_new=False)
                self._down = True
            if why is not None and self._heal is not None:
                log.warning("the embedded database is unreachable (%s): restarting it", why)
                started = time.monotonic()
                try:
                    await self._heal()
                except StoreError as e:
                    raise DatabaseUnavailable(
                        f"the embedded database stopped and could not be restarted: {e}; retry in a few seconds"
                    ) from e
                why = await self._probe()
                if why is None:
                    healed = True
                    log.warning("the embedded database is back after %.2f s", time.monotonic() - started)
            if why is not None:
                raise DatabaseUnavailable(
                    f"the database is unavailable ({why}); memlane reconnects by itself once it is back: "
                    "retry in a few seconds"
                )
            await self._replace_pool(open_new=True)
            self._down = False
        return healed

    async def _lost_during_call(self, e: psycopg.Error, generation: int) -> ConnectionLost:
        log.warning("the database connection was lost during a call: %s", _why(e))
        try:
            healed = await self._recover(generation)
        except DatabaseUnavailable as d:
            return ConnectionLost(
                f"the database connection was lost during this call ({_why(e)}); {d}", recovered=False
            )
        back = "the embedded database has been restarted" if healed else "memlane has reconnected"
        return ConnectionLost(
            f"the database connection was lost during this call ({_why(e)}); {back}: retry the call. "
            "Nothing is half-written: the call's changes were stored whole or not at all (a retried "
            "remember of a memory that did get stored answers 'duplicate' with its id)",
            recovered=True,
        )

    async def _replace_pool(self, *, open_new: bool) -> None:
        old, self.pool = self.pool, self._new_pool()
        self._generation += 1
        if open_new:
            await self.pool.open(wait=False)
        if old is not None:
            # Idle connections close now; those still in use by other calls when they come back.
            task = asyncio.get_running_loop().create_task(old.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def drop_connections(self, reason: str, *, unless: Callable[[], bool] | None = None) -> None:
        """Close this process's connections now; the next call reconnects (and heals) first. For a
        server in smart shutdown, which waits for its clients to leave: pooled idle connections
        would otherwise keep it alive forever, refusing everyone else. ``unless`` is checked once
        no recovery is running: true when that recovery has already dealt with the change."""
        if self.pool is None:
            return
        async with self._recovery:
            if unless is not None and unless():
                return
            log.warning("%s: closing this process's database connections", reason)
            await self._replace_pool(open_new=False)
            self._down = True

    # -- settings -------------------------------------------------------------------------------

    async def get_setting(self, key: str) -> str | None:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT value FROM memlane_settings WHERE key = %s", (key,))
            row = await cur.fetchone()
            return row[0] if row else None

    async def ensure_model(self, model_id: str, dim: int) -> None:
        """Record the embedding model on first use; refuse a different one against stored vectors."""
        async with self._connection() as conn, migrations.schema_lock(conn):
            cur = await conn.execute(
                "SELECT key, value FROM memlane_settings WHERE key IN ('embedding_model', 'embedding_dim')"
            )
            have = dict(await cur.fetchall())
            if have.get("embedding_model") == model_id and have.get("embedding_dim") == str(dim):
                async with conn.transaction():
                    if await vectors.replace_global_index(conn):
                        log.info("the vector index over every project is now one index per project")
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
            # The model's row first: writers share-lock it before touching memories (_check_model),
            # so taking it before the table keeps one lock order and no deadlock.
            await conn.execute("SELECT 1 FROM memlane_settings WHERE key = 'embedding_model' FOR UPDATE")
            indexed = await vectors.drop_all(conn)
            await conn.execute("UPDATE memories SET embedding = NULL WHERE embedding IS NOT NULL")
            await conn.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
            # Automatic topics' centroids are sums of the old model's vectors: they start again.
            await conn.execute("DELETE FROM memlane_topics")
            await vectors.recreate(conn, indexed)
            for k, v in (("embedding_model", model_id), ("embedding_dim", str(dim))):
                await conn.execute(
                    "INSERT INTO memlane_settings (key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (k, v),
                )
        log.info("embedding column set to vector(%d) for %s", dim, model_id)

    async def switch_model(self, model_id: str, dim: int) -> None:
        """For reembed: clear every vector and record the new model (under the migration lock)."""
        async with self._connection() as conn, migrations.schema_lock(conn):
            await self._set_vector_column(conn, model_id, dim)

    # -- writes ---------------------------------------------------------------------------------

    async def insert(
        self, rows: list[StoredRow], *, model_id: str | None = None, links: LinkPlan | None = None
    ) -> list[tuple[UUID, bool]]:
        """Insert a batch in one transaction; returns (id, created) per row, in order. An identical
        memory (same project, content and occurred_at) is not stored twice: its existing id comes
        back with created=False. One statement per batch also keeps the BM25 statistics triggers
        deadlock-free (see migration 0002). ``model_id``: the model that made the vectors; refused
        if the store's recorded model is another one (``memlane reembed`` ran meanwhile)."""
        if not rows:
            return []
        await self.index_projects({r.project for r in rows})
        async with self._connection() as conn, conn.transaction():
            await self._serialise_writes(conn, [r.project for r in rows])
            if model_id is not None:
                await self._check_model(conn, model_id)
            ids: dict[tuple[str, str], tuple[UUID, bool]] = {}
            pending = rows
            # A duplicate's row can be deleted between the INSERT that skipped it and the SELECT
            # that looks it up; the rows left without an id are inserted again (a rare second
            # statement in the transaction). Three rounds need two such deletions in a row.
            for _ in range(3):
                created = await self._insert_rows(conn, pending)
                ids.update({k: (i, True) for k, i in created.items() if k not in ids})
                missing = {(r.project, r.content_hash) for r in pending} - ids.keys()
                if missing:
                    ids.update({k: (i, False) for k, i in (await self._ids_of(conn, missing)).items()})
                pending = [r for r in pending if (r.project, r.content_hash) not in ids]
                if not pending:
                    break
            else:
                raise StoreError("memories were deleted while this batch was being stored; retry")
            if any(r.auto_topics for r in rows):
                await self._add_to_topics(conn, rows, ids)
            out: list[tuple[UUID, bool]] = []
            seen: set[tuple[str, str]] = set()
            for r in rows:
                key = (r.project, r.content_hash)
                mid, created = ids[key]
                out.append((mid, created and key not in seen))  # a repeat later in the batch is a duplicate
                seen.add(key)
            if links is not None:  # the graph, in the same transaction: stored whole or not at all
                await self._link_inserted(conn, rows, out, links)
        return out

    @staticmethod
    async def _link_inserted(
        conn: psycopg.AsyncConnection, rows: list[StoredRow], out: list[tuple[UUID, bool]], plan: LinkPlan
    ) -> None:
        """Entities and links of the rows this insert created (duplicates are not linked again)."""

        def targets(i: int) -> list[tuple[UUID, float]] | None:
            """Row i's relates_to links: its best candidates that came before it. A memory stored
            before the batch did; of the batch's new rows (one created_at), the lower ids did, as
            in the (created_at, id) order maintain rebuilds by."""
            if plan.relates is None:
                return None
            me, best = out[i][0], {}
            for t, w in plan.relates[i]:
                if isinstance(t, int):
                    t, new = out[t]
                    if new and not t < me:
                        continue
                if t != me and w > best.get(t, -2.0):
                    best[t] = w
            return sorted(best.items(), key=lambda kv: -kv[1])[: plan.settings.relates_to_k]

        items = [
            LinkItem(mid, r.project, plan.entities[i], targets(i))
            for i, (r, (mid, created)) in enumerate(zip(rows, out, strict=True))
            if created
        ]
        chain = []
        if plan.chain:
            for (a, new_a), (b, new_b) in zip(out, out[1:], strict=False):
                if new_a and new_b:
                    chain.append((a, b))
        await write_links(conn, items, plan.settings, chain)

    @staticmethod
    async def _insert_rows(
        conn: psycopg.AsyncConnection, rows: list[StoredRow]
    ) -> dict[tuple[str, str], UUID]:
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
                        r.position,
                        Jsonb(list(r.topics)) if r.topics is not None else None,
                        r.fact_type,
                    )
                    for r in rows
                ),
                strict=True,
            )
        )
        # %b: a list of vectors goes in pgvector's binary format. psycopg sends a list in text by
        # default, and printing 256 x 384 floats as decimals took 72 ms a batch, binary 1.3 ms
        # (the same holds for the other vector[] parameters: nearest_many, the topic sums).
        sql = (
            "INSERT INTO memories (project, content, content_hash, embedding, category, tags, metadata,"
            " pinned, priority, occurred_at, expires_at, source, position, topics, fact_type)"
            " SELECT r.project, r.content, r.content_hash, r.embedding, r.category,"
            " ARRAY(SELECT jsonb_array_elements_text(r.tags)), r.metadata, r.pinned, r.priority,"
            " r.occurred_at, r.expires_at, r.source, r.position,"
            " CASE WHEN r.topics IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text(r.topics)) END,"
            " r.fact_type"
            " FROM unnest(%s::text[], %s::text[], %s::text[], %b::vector[], %s::text[], %s::jsonb[], %s::jsonb[],"
            " %s::bool[], %s::int2[], %s::timestamptz[], %s::timestamptz[], %s::text[], %s::int4[],"
            " %s::jsonb[], %s::text[]) WITH ORDINALITY"
            " AS r(project, content, content_hash, embedding, category, tags, metadata, pinned, priority,"
            " occurred_at, expires_at, source, position, topics, fact_type, ord)"
            " ORDER BY r.ord"
            " ON CONFLICT (project, content_hash) DO NOTHING RETURNING id, project, content_hash"
        )
        cur = await conn.execute(sql, [list(c) for c in cols])
        return {(p, h): i for i, p, h in await cur.fetchall()}

    @staticmethod
    async def _add_to_topics(
        conn: psycopg.AsyncConnection, rows: list[StoredRow], ids: dict[tuple[str, str], tuple[UUID, bool]]
    ) -> None:
        """Add the embeddings of the rows this batch created (not its duplicates) to the centroids
        of the automatic topics they joined, creating the new ones: one UPSERT."""
        sums: dict[tuple[str, str], list] = {}
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
    async def _serialise_writes(conn: psycopg.AsyncConnection, projects: list[str]) -> None:
        """Writes of one project take turns from their first statement. They take turns anyway on
        the project's BM25 statistics row (the triggers of migration 0002), but only after their
        UPDATE has locked the memory row; a write that then links to another memory (the graph's
        foreign keys take a share lock on it) could wait for a writer that waits for the statistics
        row: a deadlock. Transaction-scoped advisory locks, in name order."""
        for project in sorted(set(projects)):
            await conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (WRITE_LOCK_CLASS, project))

    @staticmethod
    async def _check_model(conn: psycopg.AsyncConnection, model_id: str) -> None:
        """Refuse vectors of another model than the recorded one. The row is share-locked until the
        write commits, so ``switch_model`` (which locks it first) cannot slip in between."""
        cur = await conn.execute("SELECT value FROM memlane_settings WHERE key = 'embedding_model' FOR SHARE")
        row = await cur.fetchone()
        if row is None or row[0] != model_id:
            raise ModelMismatch(
                f"the store's embedding model is now {row[0] if row else 'unset'} (changed by `memlane "
                f"reembed` while this process was running) but this process embeds with {model_id}: "
                "nothing was written. Restart memlane configured with the store's model."
            )

    # Columns update() may set: the fields of MemoryPatch and the vector of new content.
    UPDATABLE = frozenset(
        {
            "content",
            "category",
            "tags",
            "pinned",
            "priority",
            "occurred_at",
            "expires_at",
            "metadata",
            "embedding",
            "topics",
            "fact_type",
        }
    )

    async def update(
        self,
        memory_id: UUID,
        fields: dict[str, Any],
        *,
        model_id: str | None = None,
        links: LinkPlan | None = None,
    ) -> Memory:
        """Set some columns of one memory in one transaction. New content or occurred_at gets a new
        content hash computed from the row as locked here, so a concurrent update of the other field
        cannot leave a stale hash."""
        unknown = set(fields) - self.UPDATABLE
        if unknown:
            raise ValueError(f"Store.update cannot set {sorted(unknown)}")
        if not fields:
            return await self.get(memory_id)
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute("SELECT project FROM memories WHERE id = %s", (memory_id,))
            found = await cur.fetchone()
            if found is not None:
                await self._serialise_writes(conn, [found[0]])
            if "embedding" in fields and model_id is not None:
                await self._check_model(conn, model_id)
            fields = dict(fields)
            if "content" in fields or "occurred_at" in fields:
                cur = await conn.execute(
                    "SELECT content, occurred_at FROM memories WHERE id = %s FOR NO KEY UPDATE", (memory_id,)
                )
                row = await cur.fetchone()
                if row is None:
                    raise NotFound(f"no memory has id {memory_id}")
                fields["content_hash"] = content_hash(
                    fields.get("content", row[0]), fields.get("occurred_at", row[1])
                )
            sets, params = [], []
            for k, v in fields.items():
                if k == "embedding":
                    v = np.asarray(v, dtype=np.float32)
                elif k == "metadata":
                    v = Jsonb(v)
                elif k in ("tags", "topics"):
                    v = list(v)
                sets.append(f"{k} = %s")
                params.append(v)
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
            if row is not None and links is not None and ("content" in fields or "occurred_at" in fields):
                # New content or date: its entities, relates_to and same_time links are made again.
                await unlink_content(conn, memory_id)
                item = LinkItem(memory_id, row["project"], extract_entities(row["content"]))
                await write_links(conn, [item], links.settings)
        if row is None:
            raise NotFound(f"no memory has id {memory_id}")
        return row_to_memory(row)

    async def delete(self, memory_id: UUID) -> Memory:
        return await self._one(f"DELETE FROM memories WHERE id = %s RETURNING {MEMORY_COLUMNS}", (memory_id,))

    async def delete_projects(self, projects: list[str]) -> int:
        """Delete every memory of these projects (their statistics go with them); returns the count."""
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute("DELETE FROM memories WHERE project = ANY(%s)", (projects,))
            # Their automatic topics and category summaries go too (migration 0007).
            await conn.execute("DELETE FROM memlane_topics WHERE project = ANY(%s)", (projects,))
            await conn.execute("DELETE FROM category_summaries WHERE project = ANY(%s)", (projects,))
            # Their mentions and links went with the memories (ON DELETE CASCADE); the entities too.
            await conn.execute("DELETE FROM memlane_entities WHERE project = ANY(%s)", (projects,))
            return cur.rowcount

    async def touch(self, ids: list[UUID]) -> None:
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

    # -- reads ----------------------------------------------------------------------------------

    async def get(self, memory_id: UUID) -> Memory:
        """One memory with its access statistics."""
        return await self._one(
            f"SELECT {MEMORY_COLUMNS}, a.access_count, a.last_accessed_at FROM memories"
            " LEFT JOIN memory_access a ON a.memory_id = memories.id WHERE id = %s",
            (memory_id,),
        )

    async def _one(self, sql: str, params: tuple) -> Memory:
        """Run a statement that returns the row of the memory whose id is the last parameter."""
        async with self._connection() as conn:
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

    async def set_embeddings(
        self, pairs: list[tuple[UUID, list[float]]], *, model_id: str | None = None
    ) -> None:
        async with self._connection() as conn, conn.transaction():
            if model_id is not None:
                await self._check_model(conn, model_id)
            async with conn.cursor() as cur:
                await cur.executemany(
                    "UPDATE memories SET embedding = %s WHERE id = %s",
                    [(np.asarray(v, dtype=np.float32), i) for i, v in pairs],
                )

    async def nearest_ids(self, project: str, embedding: list[float], k: int) -> list[UUID]:
        """A bare pgvector top-k on one project: the floor any vector recall must pay (bench)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT id FROM memories WHERE {project_is('project', project)}"
                " ORDER BY embedding <=> %s LIMIT %s",
                (np.asarray(embedding, dtype=np.float32), k),
            )
            return [r[0] for r in await cur.fetchall()]

    @asynccontextmanager
    async def try_advisory_lock(self, key: int) -> AsyncIterator[bool]:
        """Hold a session advisory lock for the block if no one else holds it; yields whether it was
        taken (never waits). Released when the block ends, or by PostgreSQL if the process dies."""
        async with self._connection() as conn:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            [got] = await cur.fetchone()
            try:
                yield got
            finally:
                if got:
                    await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    async def maintenance_tables(self) -> list[str]:
        """memlane's own tables in the current schema (what ``maintain`` vacuums)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                " AND (tablename IN ('memories', 'category_summaries') OR tablename LIKE 'memlane%%'"
                " OR tablename LIKE 'memory%%')"
                " ORDER BY tablename"
            )
            return [r[0] for r in await cur.fetchall()]

    async def vacuum_analyse(self, table: str) -> None:
        """VACUUM (ANALYZE) one table (pool connections are in autocommit mode, as VACUUM needs)."""
        async with self._connection() as conn:
            await conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(table)))

    async def server_info(self) -> dict[str, str | None]:
        """PostgreSQL's and pgvector's versions (doctor, benchmark reports)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT current_setting('server_version'),"
                " (SELECT extversion FROM pg_extension WHERE extname = 'vector')"
            )
            postgres, pgvector = await cur.fetchone()
        return {"postgres": postgres, "pgvector": pgvector}

    async def stats(self, projects: list[str] | None = None) -> dict[str, Any]:
        """Counts over the whole store, or over ``projects`` only (an access token's)."""
        scope, params = ("", ()) if projects is None else ("WHERE project = ANY(%s)", (list(projects),))
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT project, count(*) FROM memories {scope} GROUP BY project ORDER BY project", params
            )
            per_project = {p: n for p, n in await cur.fetchall()}
            cur = await conn.execute("SELECT key, value FROM memlane_settings")
            settings = dict(await cur.fetchall())
            cur = await conn.execute(
                f"SELECT count(*) FROM memories {scope} {'AND' if scope else 'WHERE'} embedding IS NULL",
                params,
            )
            (missing,) = await cur.fetchone()
        return {
            "memories": sum(per_project.values()),
            "projects": per_project,
            "embedding_model": settings.get("embedding_model"),
            "embedding_dim": int(settings["embedding_dim"]) if "embedding_dim" in settings else None,
            "missing_embeddings": missing,
            "schema_version": self.schema_version,
        }


def _read_again_once(method):
    """Run a read again, once, when its connection was lost mid-call and the database is back: a
    read has no effect to duplicate, so the caller need not see the outage at all."""

    @functools.wraps(method)
    async def wrapper(self, *args, **kwargs):
        try:
            return await method(self, *args, **kwargs)
        except ConnectionLost as e:
            if not e.recovered:
                raise
            log.info("retrying %s after the database came back", method.__name__)
            return await method(self, *args, **kwargs)

    return wrapper


# Reads, retried once (see _read_again_once). Writes are not: one whose connection died may have
# committed, and its error says so. (A list here rather than decorators, so the methods' own code
# stays as it is; touch only counts accesses, and counting one twice after a crash is harmless.)
for _name in (
    "get_setting", "get", "stats", "search", "candidates", "touch", "server_info", "nearest_ids", "handles",
    "resolve_id", "auto_topics", "access_stats", "category_centroids", "graph_reads", "entity_ids",
):  # fmt: skip
    setattr(Store, _name, _read_again_once(getattr(Store, _name)))
