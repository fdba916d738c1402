"""The store's error boundary and the engine's recovery, in-process against real PostgreSQL servers:
a dropped connection is replaced unnoticed, a server that is down fails fast with a clear error and
is reconnected to when it returns, the embedded one is restarted, and a write the crash interrupted
is absent, not half-stored. Servers that get killed here run in their own data directories."""

from __future__ import annotations

import asyncio
import signal
import time

import psycopg
import pytest
from support.postmaster import (
    await_until,
    gone,
    postmaster_pid,
    postmasters,
    signal_postmaster,
)

from memlane.pipeline import validate as v
from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import DatabaseUnavailable
from memlane.pipeline.store.embedded import EmbeddedPostgres
from memlane.server.mcp.app import State
from memlane.server.settings import Settings

pytestmark = pytest.mark.anyio


async def recalled(engine: Engine, query: str, project: str) -> list[str]:
    res = await engine.recall(dict(query=query, project=project))
    return [m.content for m, _ in res.memories]


def test_the_embedded_server_runs_with_durable_commits(pg_root):
    """An acknowledged remember survives a crash only if its commit reached the disk."""
    with psycopg.connect(pg_root) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            assert conn.execute(f"SHOW {setting}").fetchone()[0] == "on", setting


async def test_connections_the_server_dropped_are_replaced_without_an_error(engine, database_url):
    """The server ends every connection of the pool (an administrator, an idle timeout, a restart):
    the next calls check out a connection, find it dead, reconnect, and run once."""
    await engine.remember({"content": "The staging database runs on port 6543", "project": "p"})
    with psycopg.connect(database_url, autocommit=True) as admin:
        n = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()[0]
    assert n >= 1
    assert await recalled(engine, "which port does staging use?", "p") == [
        "The staging database runs on port 6543"
    ]
    out = await engine.remember({"content": "Production runs on port 5432", "project": "p"})
    assert out.status == "created"  # run once, so the status is exact


@pytest.mark.slow
async def test_an_external_database_that_is_down_fails_fast_and_is_reconnected_when_back(
    own_data_dir, embedder
):
    """External PostgreSQL (here a separate embedded server used through its DSN): memlane does not
    restart it, answers within seconds with an error an agent can act on, and reconnects by itself."""
    dsn = EmbeddedPostgres(own_data_dir).start()
    eng = Engine(EngineConfig(data_dir=own_data_dir, database=DatabaseConfig(url=dsn)), embedder=embedder)
    await eng.open()
    try:
        await eng.remember({"content": "The invoice service is written in Go", "project": "p"})
        pid = signal_postmaster(own_data_dir, signal.SIGINT)  # fast shutdown
        await await_until(lambda: gone(pid), 30, "the server stops")

        for _ in range(2):  # the first call finds dead connections, the second a store marked down
            t0 = time.monotonic()
            with pytest.raises(DatabaseUnavailable) as e:
                await recalled(eng, "what language is the invoice service in?", "p")
            took = time.monotonic() - t0
            assert took < 5, f"took {took:.1f} s to report the outage"
            assert "unavailable" in str(e.value) and "retry" in str(e.value), str(e.value)
            assert "PoolTimeout" not in str(e.value)
        assert postmaster_pid(own_data_dir) is None, "memlane must not start an external server"

        EmbeddedPostgres(own_data_dir).start()  # the administrator brings it back
        assert await recalled(eng, "what language is the invoice service in?", "p") == [
            "The invoice service is written in Go"
        ]
        out = await eng.remember({"content": "The invoice service deploys on Fridays", "project": "p"})
        assert out.status == "created"
    finally:
        await eng.close()


@pytest.mark.slow
async def test_the_embedded_server_is_restarted_and_an_interrupted_write_is_absent(own_data_dir, embedder):
    """SIGKILL to the embedded postmaster in the middle of a remember_many transaction: the call
    fails within seconds saying the database was restarted; the memories acknowledged before are
    there, none of the interrupted batch is (not half-stored), and the retried batch is created."""
    eng = Engine(EngineConfig(data_dir=own_data_dir), embedder=embedder)
    await eng.open()
    try:
        kept = ["Dana owns the billing service", "The billing service bills monthly"]
        for c in kept:
            await eng.remember({"content": c, "project": "p"})
        batch = [
            {"content": "Eve joined the data team", "project": "p"},
            {"content": "The data team meets on Tuesdays", "project": "p"},
            {"content": "Frank leads the data team", "project": "p"},
        ]
        # Another session inserts the batch's third memory and keeps its transaction open, so the
        # batch's INSERT writes its first two rows, then waits on the third row's unique key.
        blocker = await psycopg.AsyncConnection.connect(eng.store._dsn)
        await blocker.execute(
            "INSERT INTO memories (project, content, content_hash) VALUES ('p', %s, %s)",
            (batch[2]["content"], v.content_hash(batch[2]["content"], None)),
        )
        write = asyncio.create_task(eng.remember_many(batch))
        async with await psycopg.AsyncConnection.connect(eng.store._dsn, autocommit=True) as watch:

            async def waiting_on_the_lock() -> bool:
                cur = await watch.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND query LIKE 'INSERT INTO memories%%'"
                )
                return (await cur.fetchone())[0] == 1

            deadline = time.monotonic() + 30
            while not await waiting_on_the_lock():
                assert time.monotonic() < deadline, "the batch never reached the row lock"
                await asyncio.sleep(0.02)

        t0 = time.monotonic()
        signal_postmaster(own_data_dir, signal.SIGKILL)
        with pytest.raises(DatabaseUnavailable) as e:
            await write
        took = time.monotonic() - t0
        print(f"\ninterrupted write reported after {took:.2f} s: {e.value}")
        assert took < 20
        assert "restarted" in str(e.value) and "retry" in str(e.value)
        await blocker.close()  # its connection died with the server

        assert len(postmasters(own_data_dir)) == 1
        contents = {m.content for b in [x async for x in eng.store.iter_memories("p")] for m in b}
        assert contents == set(kept), "an acknowledged memory is missing or the interrupted batch left rows"
        out = await eng.remember_many(batch)
        assert [o.status for o in out] == ["created"] * 3
    finally:
        await eng.close()


async def test_a_failed_start_up_is_retried_on_the_next_call(pg_root, embedder, tmp_path):
    """The database is not there at start-up (here: not created yet); once it is, the next tool call
    starts the engine instead of repeating the first error for the life of the process."""
    from support.db import with_db

    name = "t_late_" + str(int(time.time() * 1000))
    settings = Settings(data_dir=tmp_path, database=DatabaseConfig(url=with_db(pg_root, name)))
    state = State(settings, Engine(settings.engine(), embedder=embedder))
    from mcp.server.mcpserver.exceptions import ToolError

    with pytest.raises(ToolError, match="could not start its database"):
        await state.ready()
    with psycopg.connect(pg_root, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    eng = await state.ready()
    assert (
        await eng.remember({"content": "Grace prefers morning meetings", "project": "p"})
    ).status == "created"
    await state.close()


@pytest.mark.parametrize("delay", [0.0, 0.01, 0.05, 0.2])
async def test_closing_during_start_up_leaves_no_connection_behind(settings, embedder, database_url, delay):
    """State.close cancels a start-up in progress and waits for it to unwind (Engine.open closes a
    half-opened pool on cancellation), whatever phase it was in."""
    state = State(settings, Engine(settings.engine(), embedder=embedder))
    state.start()
    await asyncio.sleep(delay)
    await state.close()
    assert state._startup.done(), "close returned while the start-up was still unwinding"
    assert state.engine.runtime.store is None

    def sessions() -> list[tuple]:
        """Every other session on this test's database, with what it is."""
        with psycopg.connect(database_url, autocommit=True) as conn:
            return conn.execute(
                "SELECT backend_type, application_name, state, query FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()

    def connections() -> int:
        # Clients only: the server's autovacuum workers visit every database, this one too, and
        # were once counted here as a leak.
        return sum(1 for s in sessions() if s[0] == "client backend")

    await await_until(lambda: connections() == 0, 5, "the start-up's connections are closed")
    await asyncio.sleep(0.5)  # a leaked pool would reconnect meanwhile
    assert connections() == 0, sessions()


@pytest.mark.slow
def test_a_smart_shutdown_held_open_by_another_client_is_finished_and_the_server_started(
    own_data_dir, monkeypatch
):
    """SIGTERM to the postmaster while a client that is not memlane (psql, an older memlane) stays
    connected: PostgreSQL waits for it forever and refuses new connections. Starting memlane then
    waits a bounded time, turns the shutdown into a fast one, and starts the server again, instead
    of failing with "could not start the embedded PostgreSQL"."""
    from memlane.pipeline.store import embedded

    monkeypatch.setattr(embedded, "STOPPING_WAIT", 1.0)  # 10 s in production; the path is the same
    dsn = EmbeddedPostgres(own_data_dir).start()
    holder = psycopg.connect(dsn, autocommit=True)
    old = signal_postmaster(own_data_dir, signal.SIGTERM)
    assert holder.execute("SELECT 1").fetchone() == (1,)  # a smart shutdown keeps its clients

    t0 = time.monotonic()
    assert EmbeddedPostgres(own_data_dir).start() == dsn
    took = time.monotonic() - t0
    assert 1.0 <= took < 10, took
    assert gone(old) and postmasters(own_data_dir) == [postmaster_pid(own_data_dir)] != [old]
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError):
        holder.execute("SELECT 1")  # ended by the fast shutdown
    holder.close()


async def _terminate_when_waiting(database_url: str, n: int, query_like: str = "%") -> int:
    """Terminate the ``n`` sessions of the database that wait on a lock, once they all do; only
    those running a statement ``LIKE query_like`` (a recall's background cache fill may wait too)."""
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as admin:
        deadline = time.monotonic() + 30
        while True:
            cur = await admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE %s",
                (query_like,),
            )
            pids = [r[0] for r in await cur.fetchall()]
            if len(pids) >= n:
                break
            assert time.monotonic() < deadline, f"{len(pids)} of {n} sessions reached the lock"
            await asyncio.sleep(0.02)
        for pid in pids:
            await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return len(pids)


async def test_the_graph_arms_reads_run_again_when_their_connection_dies(engine, database_url):
    """The graph arm's reads (the question's entities, a hop) are reads like the others: one whose
    connection is lost mid-call runs again, and the recall answers as if nothing happened."""
    await engine.remember_many(
        [
            {"content": "Hana keeps the on-call rota in a shared spreadsheet", "project": "g", "source": "s"},
            {"content": "Hana moved the rota to the wiki in May", "project": "g", "source": "s"},
        ]
    )
    blocker = await psycopg.AsyncConnection.connect(database_url)
    await blocker.execute("LOCK TABLE memory_links, memlane_entities IN ACCESS EXCLUSIVE MODE")
    read = asyncio.create_task(recalled(engine, "where does Hana keep the rota?", "g"))
    assert await _terminate_when_waiting(database_url, 2) >= 2  # the entity lookup and the first hop
    await blocker.rollback()
    await blocker.close()
    assert "Hana keeps the on-call rota in a shared spreadsheet" in await read


async def test_a_read_whose_connection_dies_mid_call_runs_again_and_a_write_reports_it(engine, database_url):
    """A connection lost in the middle of a statement (the server is fine): a read (recall) runs
    again on a new connection and the caller sees nothing; a write is not repeated, since it may
    have committed, and fails at once saying so."""
    await engine.remember({"content": "The release train leaves every second Thursday", "project": "p"})
    blocker = await psycopg.AsyncConnection.connect(database_url)
    await blocker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")  # every query waits
    read = asyncio.create_task(recalled(engine, "when does the release train leave?", "p"))
    # The keyword arm's statement (and the vector arm's, when the question is embedded before the
    # keyword arm's statement could run): each runs again on a new connection.
    assert await _terminate_when_waiting(database_url, 1) >= 1
    await blocker.rollback()
    assert await read == ["The release train leaves every second Thursday"]

    await blocker.execute("LOCK TABLE memories IN ACCESS EXCLUSIVE MODE")
    write = asyncio.create_task(
        engine.remember({"content": "The release train skips August", "project": "p"})
    )
    # The remember's first statement, its neighbour search (the earlier recall's background reads
    # may wait on the lock too, and they are not the write).
    assert await _terminate_when_waiting(database_url, 1, "%FROM unnest(%") == 1
    await blocker.rollback()
    await blocker.close()
    with pytest.raises(DatabaseUnavailable, match="lost during this call .* retry the call"):
        await write
    assert await recalled(engine, "does the release train run in August?", "p") == [
        "The release train leaves every second Thursday"
    ]
