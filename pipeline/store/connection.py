"""The store's connections: a pool, and its recovery when the database goes away.

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
import json
import logging
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import psycopg
from pgvector.psycopg import register_vector_async
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from memlane.pipeline import telemetry
from memlane.pipeline.errors import ConnectionLost, DatabaseUnavailable, StoreError
from memlane.pipeline.errors import database_reason as _why
from memlane.pipeline.store import backup
from memlane.pipeline.store import migrate as migrations
from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.replicas import current_route

log = logging.getLogger(__name__)

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


def _json_loads(data: str | bytes) -> Any:
    """json.loads, but an empty object (most memories' metadata) without the decoder: recall reads
    a hundred rows a question, and json.loads of b"{}" costs about 40 times this test."""
    return {} if data == b"{}" else json.loads(data)


class TracedCursor(psycopg.AsyncCursor[Any]):
    """A cursor whose statements are spans (traces on: ``telemetry.tracing()``), named by their
    operation, with memlane's own SQL as ``db.query.text``: never a parameter (memory text, a
    query), which psycopg sends apart from it."""

    async def execute(self, query: Any, params: Any = None, **kwargs: Any) -> TracedCursor:
        name, attributes = _statement(query)
        with telemetry.span(name, **attributes):
            await super().execute(query, params, **kwargs)
        return self

    async def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> None:
        name, attributes = _statement(query)
        with telemetry.span(name, **attributes):
            await super().executemany(query, params_seq, **kwargs)


def _statement(query: Any) -> tuple[str, dict[str, str]]:
    """A span's name and attributes for a statement (a composed one is named by its kind only)."""
    text = query if isinstance(query, str) else query.decode() if isinstance(query, bytes) else ""
    words = text.split(None, 1)
    operation = words[0].upper() if words else "SQL"
    attributes = {"db.system.name": "postgresql", "db.operation.name": operation}
    if text:
        attributes["db.query.text"] = " ".join(text.split())[:2000]
    return f"db {operation}", attributes


class Connections(StorePart):
    """The store's connections: the pool and its recovery, the part of ``Store`` every other part's
    queries go through (``_connection()``)."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_min: int = 1,
        pool_max: int = 8,
        timeout: float = 30.0,
        heal: Callable[[], Awaitable[None]] | None = None,
        data_dir: Path | None = None,
        before_migrations: Callable[[psycopg.AsyncConnection, int], Awaitable[None]] | None = None,
    ) -> None:
        """``heal`` brings a stopped database back (the engine passes one for the embedded server;
        an external server is only reconnected to). It must be safe to call from several processes
        at once. ``data_dir``: where the backups are (``backups/``), named when the store is newer
        than this code. ``before_migrations``: run before an existing store's schema is upgraded
        (the automatic backup)."""
        self._dsn = dsn
        self._data_dir = data_dir
        self._before_migrations = before_migrations
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
        self._answered: weakref.WeakKeyDictionary[psycopg.AsyncConnection, float]
        self._answered = weakref.WeakKeyDictionary()  # conn -> monotonic
        self._closing: set[asyncio.Task[None]] = set()
        self._indexed: set[str] = set()  # projects known to have their vector index (vectors.py)
        self._below: dict[str, tuple[int, float]] = {}  # projects counted below it (vectors.py)
        self._unindexed: dict[str, float] = {}  # projects seen without their index (vectors.py)

    @property
    def parallel_reads(self) -> int:
        """How many statements one call may run at once, each on a connection of its own: a
        quarter of the pool, so that other calls still find connections free."""
        return max(1, self._pool_max // 4)

    @property
    def dsn(self) -> str:
        """The connection string the store was opened with, password included: for a tool that
        needs a connection of its own to the same database (a benchmark's CREATE DATABASE, say).
        Not for logs or reports."""
        return self._dsn

    async def open(self) -> None:
        try:
            async with await self._connect(autocommit=True, connect_timeout=int(self._timeout)) as conn:
                await conn.execute("SET client_min_messages = warning")
                self.schema_version = await migrations.migrate(conn, self._before_migrations)
        except psycopg.OperationalError as e:
            raise StoreError(f"cannot connect to PostgreSQL: {e}".strip()) from e
        except psycopg.errors.FeatureNotSupported as e:  # pragma: no cover - external servers
            raise StoreError(f"the database lacks a feature memlane needs: {e}") from e
        except psycopg.errors.UndefinedFile as e:  # pragma: no cover - external servers
            raise StoreError(
                f"the pgvector extension is not installed on this PostgreSQL server ({e}); install pgvector"
            ) from e
        if self.schema_version > migrations.latest_version():
            raise StoreError(self._newer_schema())
        self.pool = self._new_pool()
        try:
            await self.pool.open(wait=True, timeout=self._timeout)
        except PoolTimeout as e:
            await self.close()
            raise StoreError(
                f"cannot connect to PostgreSQL: no connection within {self._timeout:.0f} s"
            ) from e

    def _newer_schema(self) -> str:
        """Why a store migrated by a newer memlane is refused, and the two ways out: that memlane,
        or the newest backup this code can read (one taken before the upgrade, say)."""
        latest = migrations.latest_version()
        found = restorable_backup(self._data_dir, latest) if self._data_dir else None
        way_back = (
            f"restore the backup taken before the upgrade: memlane restore {found}"
            if found is not None
            else "restore a backup made with this version (memlane restore FILE)"
        )
        return (
            f"the database schema is version {self.schema_version}, newer than this memlane knows "
            f"({latest}): upgrade memlane, or {way_back}"
        )

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
        await register_vector_async(conn)
        psycopg.types.json.set_json_loads(_json_loads, conn)
        # With a project filter, a plain HNSW scan can return fewer than k rows; pgvector 0.8's
        # iterative scan keeps walking the graph until the filter has enough matches.
        await conn.execute("SET hnsw.iterative_scan = relaxed_order")
        await conn.execute("SET hnsw.ef_search = 100")
        # A statement psycopg has prepared (at its second run on the connection, below) keeps one
        # plan instead of being planned again at each run: about a fifth less server CPU per
        # recall, with the same results, and faster writes (docs/benchmarks.md). Planner settings
        # never vary between runs of one text: the project is in the text (store/vectors.py), and
        # the write path's SET LOCALs are the same at every run of the statements they precede.
        # What a generic plan must not guess is in the text too: the recall arms' LIMIT
        # (store/search.py).
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.commit()
        # Prepared at its second run on the connection, not its fifth (psycopg's default): recall's
        # statements name the project in their text, and with the pool's connections taken in
        # turn, a project's statements ran mostly unprepared, planned at every run (about 1 ms for
        # the keyword arm's). Not at the first: psycopg then drops a multi-statement text before
        # preparing it, and a text run once is never prepared, so one-off texts stay out of the
        # per-connection cache (100 statements). About a tenth less PostgreSQL CPU per recall at
        # 100,000 memories, none at a million (docs/benchmarks.md).
        conn.prepare_threshold = 1

    def _new_pool(self) -> AsyncConnectionPool:
        return AsyncConnectionPool(
            self._dsn,
            min_size=self._pool_min,
            max_size=self._pool_max,
            timeout=self._timeout,
            configure=self._configure,
            # connect_timeout: without it a pool reconnecting to an unreachable host blocks for the
            # kernel's TCP timeout (minutes), and so would closing the pool.
            kwargs={
                "autocommit": True,
                "connect_timeout": max(PROBE_TIMEOUT, int(min(self._timeout, 10))),
                **({"cursor_factory": TracedCursor} if telemetry.tracing() else {}),
            },
            open=False,
        )

    async def close(self) -> None:
        self.cancel_background_reads()
        if self.pool is not None:
            pool, self.pool = self.pool, None
            await pool.close()
        if self._closing:  # pools replaced after an outage, still closing in the background
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def reachable(self, timeout: float) -> bool:
        """Whether a statement runs on the primary now, within ``timeout`` seconds: the readiness
        check (a stopped embedded server is brought back on the way, as for any call)."""
        try:
            async with asyncio.timeout(timeout):
                async with self._connection() as conn:
                    await conn.execute("SELECT 1")
        except (StoreError, psycopg.Error, TimeoutError):
            return False
        return True

    @property
    def serving(self) -> bool:
        """Open, and not known to be down: a call now would not wait for a recovery first."""
        return self.pool is not None and not self._down

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
        route = current_route()
        if route is not None:  # a recall reading a replica (replicas.py): none of the recovery here
            async with route.connection() as conn:
                yield conn
            return
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

    @asynccontextmanager
    async def try_advisory_lock(self, key: int) -> AsyncIterator[bool]:
        """Hold a session advisory lock for the block if no one else holds it; yields whether it was
        taken (never waits). Released when the block ends, or by PostgreSQL if the process dies."""
        async with self._connection() as conn:
            cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))
            [got] = await one_row(cur)
            try:
                yield got
            finally:
                if got:
                    await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


def restorable_backup(data_dir: Path, latest: int) -> Path | None:
    """The newest backup in ``DATA_DIR/backups`` (by the time in its name) of a schema no newer
    than ``latest``, or None."""
    usable = [
        p
        for p in backup.listed(data_dir)
        if (named := backup.NAME_RE.fullmatch(p.name)) and int(named.group(2)) <= latest
    ]
    return usable[-1] if usable else None


# A method of a part of Store (``self``: the part), and its parameters and result.
_Self = TypeVar("_Self")
_P = ParamSpec("_P")
_T = TypeVar("_T")
_Method = Callable[Concatenate[_Self, _P], Awaitable[_T]]
_Again = Callable[Concatenate[_Self, _P], Coroutine[Any, Any, _T]]


def read_again_once(method: _Method[_Self, _P, _T]) -> _Again[_Self, _P, _T]:
    """Run a read again, once, when its connection was lost mid-call and the database is back: a
    read has no effect to duplicate, so the caller need not see the outage at all. Writes are not
    retried: one whose connection died may have committed, and its error says so."""
    return _again_once(method)


def count_again_once(method: _Method[_Self, _P, _T]) -> _Again[_Self, _P, _T]:
    """Run ``count_accesses``, a write whose only effect is counting accesses, again once like a read: if the
    lost call did commit, those accesses count twice, which only nudges a scoring adjustment."""
    return _again_once(method)


def _again_once(method: _Method[_Self, _P, _T]) -> _Again[_Self, _P, _T]:
    @functools.wraps(method)
    async def again(self: _Self, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        try:
            return await method(self, *args, **kwargs)
        except ConnectionLost as e:
            if not e.recovered:
                raise
            log.info("retrying %s after the database came back", method.__name__)
            return await method(self, *args, **kwargs)

    return again
