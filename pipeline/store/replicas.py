"""Read replicas: recall's reads on hot standbys (``database.read_urls``), every write on the primary.

Read-your-writes. After a caller's write (remember, ingest, update, forget) the engine records the
primary's WAL position for that caller (``note_write``) in the primary's ``memlane_write_marks``
(migration 0011), so every memlane process on the database knows it: behind a round-robin balancer,
a write through one server and the next recall through another are still ordered. The caller's next
recall picks a replica (round robin over those up), reads the caller's position on the primary (one
indexed read), and polls the replica's replay position until it has replayed that far, for at most
``database.replica_wait_ms``; then every read of that recall goes to the replica, or, if it stayed
behind, to the primary. A caller is a key the server gives (``CALLER``, a context variable: the HTTP
token's name, the MCP session, or one key for every client without either), stored hashed.

A replica that fails (cannot connect, connection lost, not in recovery, an older schema) is marked
down for ``DOWN_S`` and probed again in the background afterwards: no recall waits on a dead host,
and no client sees an error; a recall whose replica failed midway runs again on the primary
(``ReplicaLost``, caught by the engine). The route of the recall running now is a context variable
read by ``Connections._connection()``, so the store's read methods need not know about replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from memlane.pipeline.errors import database_reason as _why
from memlane.pipeline.store.base import StorePart, one_row

log = logging.getLogger(__name__)

LOCAL_CALLER = "local"
# Who is calling, for read-your-writes: set by the server per tool call; unset (the CLI, the
# benchmarks, stdio) every call of the process is one caller.
CALLER: ContextVar[str] = ContextVar("memlane_caller", default=LOCAL_CALLER)
_ROUTE: ContextVar[ReadRoute | None] = ContextVar("memlane_read_route", default=None)

DOWN_S = 5.0  # a failed replica is left alone this long, then probed in the background
# A replica's pooled connection normally comes at once; longer means it is busy or unreachable,
# and the primary answers instead (also bounds a recall's cost on a replica that just died).
ACQUIRE_S = 0.5
PROBE_TIMEOUT = 2  # libpq connect_timeout (integer seconds, at least 2) of a replica's probes
MAX_CALLERS = 10_000  # write positions this process keeps (the least recently written dropped first)
# Marks of callers who wrote nothing for this long are deleted (checked at most every PRUNE_EVERY_S
# by each process): a standby an hour behind is broken, not lagging, and the table stays small.
MARK_TTL_S = 3600
PRUNE_EVERY_S = 600
# Polling the replay position: the first check at once (on a nearby standby the write has usually
# been replayed by the time the client asks), then sleeps doubling up to POLL_MAX_S.
POLL_FIRST_S = 0.001
POLL_MAX_S = 0.02
_BEHIND = "behind the primary"
_INFINITE_LSN = 1 << 64  # "read the primary": a write whose position could not be read

# At start-up the primary has just run its migrations: a replica still replaying them is waited
# for this long before it is set aside (then retried every DOWN_S).
OPEN_PATIENCE_S = 3.0


class ReplicaLost(Exception):
    """A recall's replica failed mid-recall: the engine runs the recall again on the primary."""


def parse_lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def format_lsn(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def caller_mark(caller: str) -> str:
    """The key of ``caller`` in ``memlane_write_marks``: a hash, since a caller can be an MCP
    session id, which lets whoever holds it act in that session."""
    return hashlib.sha256(caller.encode()).hexdigest()[:32]


def replica_name(dsn: str) -> str:
    """host:port/dbname of a read URL, without its credentials (logs, traces, doctor)."""
    try:
        info = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "replica"
    return f"{info.get('host', 'localhost')}:{info.get('port', '5432')}/{info.get('dbname', '')}"


@dataclass
class ReadRoute:
    """Where one recall reads: ``read_from`` "replica" or "primary", the wait for the replica's
    replay in ms, and why the primary was used when it was (``reason``)."""

    read_from: str
    wait_ms: float = 0.0
    reason: str | None = None
    replica: Replica | None = None
    failed: bool = False

    def trace(self) -> dict[str, Any]:
        out: dict[str, Any] = {"read_from": self.read_from, "read_wait_ms": round(self.wait_ms, 3)}
        if self.replica is not None:
            out["replica"] = self.replica.name
        if self.reason:
            out["read_reason"] = self.reason
        return out

    def fail(self, why: str, *, down: bool) -> None:
        """The replica failed this recall: the engine reruns it on the primary. ``down``: the
        replica itself is gone (not just this query), so later recalls skip it for a while."""
        if not self.failed:
            self.failed = True
            replica = self._replica()
            log.warning("recall on replica %s failed (%s): reading the primary", replica.name, why)
            if down:
                replica.mark_down(why)

    def _replica(self) -> Replica:
        """The replica of a route that reads one: ``Replicas.route`` gives every such route its replica."""
        assert self.replica is not None, "a route without a replica reads the primary"
        return self.replica

    def fell_back(self) -> None:
        self.read_from = "primary"
        self.reason = "replica failed during the recall"

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """A connection of the route's replica; any failure of the replica raises ReplicaLost."""
        if self.failed:
            raise ReplicaLost("the replica already failed in this recall")
        replica = self._replica()
        pool = replica.pool
        if pool is None:
            self.fail("marked down", down=False)
            raise ReplicaLost("the replica is down")
        try:
            conn = await pool.getconn(timeout=ACQUIRE_S)
        except (PoolTimeout, PoolClosed) as e:
            # Every connection in use is a busy replica, which stays in the rotation; fewer means
            # it cannot connect.
            busy = isinstance(e, PoolTimeout) and replica.in_use >= pool.max_size
            self.fail(f"no connection within {ACQUIRE_S} s" + (" (all busy)" if busy else ""), down=not busy)
            raise ReplicaLost("no replica connection") from e
        replica.in_use += 1
        try:
            yield conn
        except psycopg.Error as e:
            # Any error on a replica reruns the recall on the primary, which answers it exactly: a
            # lost connection (the replica is then set aside a while), a recovery conflict (replay
            # cancelled the query), a schema the replica has not replayed yet. A statement that
            # fails on the primary too reports its error from there.
            if isinstance(e, psycopg.errors.ReadOnlySqlTransaction):
                log.error("a recall wrote on a replica (%s); it runs again on the primary", e)
            self.fail(_why(e), down=conn.broken or conn.closed)
            raise ReplicaLost(_why(e)) from e
        finally:
            replica.in_use -= 1
            await pool.putconn(conn)


def current_route() -> ReadRoute | None:
    """The replica route of the recall running in this task, if it reads a replica."""
    route = _ROUTE.get()
    return route if route is not None and route.read_from == "replica" else None


def routed(route: ReadRoute | None) -> Token[ReadRoute | None]:
    return _ROUTE.set(route)


def unrouted(token: Token[ReadRoute | None]) -> None:
    _ROUTE.reset(token)


class Replica:
    """One read URL: its pool while it is up, and when it may be tried again after a failure."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_min: int,
        pool_max: int,
        configure: Callable[[psycopg.AsyncConnection], Awaitable[None]],
        schema_version: int,
    ) -> None:
        self.dsn = dsn
        self.name = replica_name(dsn)
        self._pool_min = pool_min
        self._pool_max = pool_max
        self._configure = configure
        self._schema_version = schema_version
        self.pool: AsyncConnectionPool | None = None
        self.in_use = 0  # connections recalls hold now (a pool timeout with all in use: busy, not down)
        self.down_until = 0.0
        self.why_down: str | None = "not probed yet"
        self._probing: asyncio.Task[bool] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    def usable(self) -> bool:
        """Up now; when down past its time, start a probe in the background (and say not yet)."""
        if self.pool is not None:
            return True
        if not self._closed and time.monotonic() >= self.down_until and self._probing is None:
            self._probing = asyncio.ensure_future(self.probe())
            self._probing.add_done_callback(lambda _t: setattr(self, "_probing", None))
        return False

    async def probe(self, patience_s: float = 0.0) -> bool:
        """Connect directly: a hot standby with this schema gets a pool; otherwise down a while.
        ``patience_s``: how long to wait for a replica that answers but has not replayed the
        primary's schema yet."""
        deadline = time.monotonic() + patience_s
        while (why := await self._check()) is not None and why.startswith(_BEHIND):
            if time.monotonic() >= deadline or self._closed:
                break
            await asyncio.sleep(0.05)
        if why is not None:
            if self.why_down != why:
                log.warning("read replica %s is not used (%s); retried every %.0f s", self.name, why, DOWN_S)
            self.why_down = why
            self.down_until = time.monotonic() + DOWN_S
            return False
        if self._closed:
            return False
        pool = AsyncConnectionPool(
            self.dsn,
            min_size=self._pool_min,
            max_size=self._pool_max,
            timeout=ACQUIRE_S,
            configure=self._configure,
            kwargs={"autocommit": True, "connect_timeout": PROBE_TIMEOUT},
            open=False,
        )
        await pool.open(wait=False)
        if self.why_down is not None and self.why_down != "not probed yet":
            log.warning("read replica %s is back", self.name)
        self.pool, self.why_down = pool, None
        return True

    async def _check(self) -> str | None:
        try:
            async with await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, connect_timeout=PROBE_TIMEOUT
            ) as conn:
                cur = await conn.execute(
                    "SELECT pg_is_in_recovery(), (SELECT coalesce(max(version), 0) FROM memlane_migrations)"
                )
                recovering, version = await one_row(cur)
        except psycopg.errors.UndefinedTable:
            return f"{_BEHIND}: no memlane schema there yet"
        except psycopg.Error as e:
            return _why(e)
        if not recovering:
            return "not a hot standby (pg_is_in_recovery() is false)"
        if version < self._schema_version:
            return f"{_BEHIND}: schema version {version}, the primary's is {self._schema_version}"
        return None

    def mark_down(self, why: str) -> None:
        self.why_down = why
        self.down_until = time.monotonic() + DOWN_S
        pool, self.pool = self.pool, None
        if pool is not None:  # its connections are dead; closing also stops its reconnect attempts
            task = asyncio.ensure_future(pool.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        self._closed = True
        if self._probing is not None:
            self._probing.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._probing
        if self.pool is not None:
            pool, self.pool = self.pool, None
            await pool.close()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)


class Replicas:
    """Every read URL, the write positions of the callers, and the choice of where a recall reads."""

    def __init__(
        self,
        dsns: list[str],
        *,
        wait_ms: float,
        pool_min: int,
        pool_max: int,
        configure: Callable[[psycopg.AsyncConnection], Awaitable[None]],
        schema_version: int,
        marks: WriteMarks,
    ) -> None:
        self.wait_ms = wait_ms
        self.marks = marks
        self.replicas = [
            Replica(
                dsn, pool_min=pool_min, pool_max=pool_max, configure=configure, schema_version=schema_version
            )
            for dsn in dsns
        ]
        # caller -> WAL position of its last write through this process: what a recall waits for
        # when the primary's marks cannot be read
        self._written: OrderedDict[str, int] = OrderedDict()
        self._next = 0
        self._pruned_at = time.monotonic()

    async def open(self) -> None:
        """Probe every replica (bounded by PROBE_TIMEOUT); one that is down is retried later and
        never stops the server from starting: recalls read the primary meanwhile."""
        await asyncio.gather(*(r.probe(OPEN_PATIENCE_S) for r in self.replicas))

    async def close(self) -> None:
        await asyncio.gather(*(r.close() for r in self.replicas), return_exceptions=True)

    async def note_write(self, caller: str) -> None:
        """After ``caller``'s write committed: where the primary's WAL is now, which a replica must
        have replayed before that caller reads it, recorded on the primary for every process. If it
        cannot be recorded, this process's next recalls for the caller read the primary until it
        writes again (another process's recalls wait for its earlier write, if any)."""
        try:
            prune = time.monotonic() - self._pruned_at >= PRUNE_EVERY_S
            lsn = parse_lsn(await self.marks.mark_write(caller_mark(caller), MARK_TTL_S if prune else None))
            if prune:
                self._pruned_at = time.monotonic()
        except Exception as e:  # noqa: BLE001 - the write is done; only where to read changes
            log.warning(
                "could not record the primary's WAL position (%s): the next recall reads the primary", e
            )
            lsn = _INFINITE_LSN
        self._written[caller] = max(lsn, self._written.pop(caller, 0))
        while len(self._written) > MAX_CALLERS:
            self._written.popitem(last=False)

    async def written(self, caller: str) -> int | None:
        """The WAL position of ``caller``'s last write through any process, as the primary records
        it (this process's own record when the primary's cannot be read)."""
        mine = self._written.get(caller)
        try:
            shared = await self.marks.write_mark(caller_mark(caller))
        except Exception as e:  # noqa: BLE001 - the recall reads where this process's record says
            log.warning("could not read the callers' write positions on the primary (%s)", e)
            return mine
        if shared is None:
            return mine
        return max(parse_lsn(shared), mine or 0)

    def _pick(self) -> Replica | None:
        n = len(self.replicas)
        for i in range(n):
            replica = self.replicas[(self._next + i) % n]
            if replica.usable():
                self._next = (self._next + i + 1) % n
                return replica
        return None

    async def route(self, caller: str) -> ReadRoute:
        """Where ``caller``'s recall reads, having waited (bounded) for its last write's replay."""
        replica = self._pick()
        if replica is None:
            why = "; ".join(f"{r.name}: {r.why_down}" for r in self.replicas)
            return ReadRoute("primary", reason=f"no replica up ({why})")
        lsn = await self.written(caller)
        if lsn is None:
            return ReadRoute("replica", replica=replica)
        if lsn == _INFINITE_LSN:
            return ReadRoute("primary", reason="the last write's WAL position is unknown")
        started = time.monotonic()
        route = ReadRoute("replica", replica=replica)
        try:
            async with route.connection() as conn:
                caught_up = await self._wait_replayed(conn, lsn, started + self.wait_ms / 1000)
        except ReplicaLost:
            caught_up = None
        route.wait_ms = (time.monotonic() - started) * 1000
        if caught_up is None:
            return ReadRoute("primary", wait_ms=route.wait_ms, reason=f"replica {replica.name} failed")
        if not caught_up:
            return ReadRoute(
                "primary",
                wait_ms=route.wait_ms,
                reason=f"replica {replica.name} had not replayed this caller's last write "
                f"within {self.wait_ms:g} ms",
            )
        return route

    @staticmethod
    async def _wait_replayed(conn: psycopg.AsyncConnection, lsn: int, deadline: float) -> bool:
        """Poll the replica until it has replayed ``lsn`` or ``deadline`` passes."""
        pause = POLL_FIRST_S
        target = format_lsn(lsn)
        while True:
            cur = await conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,))
            [done] = await one_row(cur)
            if done:  # NULL (not replaying: promoted meanwhile) counts as behind
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, POLL_MAX_S)

    async def status(self, primary_lsn: int | None) -> list[dict[str, Any]]:
        """Each replica: up or why not, and how far its replay trails ``primary_lsn`` in bytes."""
        out = []
        for r in self.replicas:
            row: dict[str, Any] = {"replica": r.name, "up": r.pool is not None}
            if r.pool is None:
                row["why"] = r.why_down
            else:
                try:
                    async with r.pool.connection(timeout=ACQUIRE_S) as conn:
                        cur = await conn.execute(
                            "SELECT pg_last_wal_replay_lsn()::text,"
                            " extract(epoch FROM now() - pg_last_xact_replay_timestamp())"
                        )
                        replayed, behind_s = await one_row(cur)
                    if replayed is not None and primary_lsn is not None:
                        row["lag_bytes"] = max(primary_lsn - parse_lsn(replayed), 0)
                    if behind_s is not None:
                        row["last_replayed_s_ago"] = round(float(behind_s), 3)
                except (psycopg.Error, PoolTimeout, PoolClosed) as e:
                    row["up"], row["why"] = False, _why(e)
            out.append(row)
        return out


class WriteMarks(StorePart):
    """Mixed into Store; needs ``_connection()``. The callers' write positions (migration 0011),
    always on the primary: ``Replicas.route`` reads them before it routes the recall."""

    async def wal_position(self) -> str:
        """The primary's current WAL write position (``pg_current_wal_lsn()``), as text."""
        async with self._connection() as conn:
            cur = await conn.execute("SELECT pg_current_wal_lsn()::text")
            lsn: str = (await one_row(cur))[0]
        return lsn

    async def mark_write(self, caller: str, prune_older_s: float | None = None) -> str:
        """Record that ``caller`` (a hashed key) has written up to the primary's WAL position now,
        never moving its mark back (two of its writes may finish in either order); returns the
        mark. ``prune_older_s``: also delete the marks of callers who wrote nothing for that long."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "INSERT INTO memlane_write_marks AS w (caller, lsn) VALUES (%s, pg_current_wal_lsn())"
                " ON CONFLICT (caller) DO UPDATE SET lsn = greatest(w.lsn, excluded.lsn), written_at = now()"
                " RETURNING lsn::text",
                (caller,),
            )
            lsn: str = (await one_row(cur))[0]
            if prune_older_s is not None:
                await conn.execute(
                    "DELETE FROM memlane_write_marks WHERE written_at < now() - make_interval(secs => %s)",
                    (prune_older_s,),
                )
        return lsn

    async def write_mark(self, caller: str) -> str | None:
        """``caller``'s recorded write position, or None when it has not written (or long ago)."""
        async with self._connection() as conn:
            cur = await conn.execute("SELECT lsn::text FROM memlane_write_marks WHERE caller = %s", (caller,))
            row = await cur.fetchone()
        mark: str | None = row[0] if row else None
        return mark
