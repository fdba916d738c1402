"""Faults injected into real processes: PostgreSQL stopped under a running HTTP server, ``memlane
import`` and a server killed with SIGKILL in the middle of writing, the process that started the
embedded PostgreSQL killed under another one, a read-only data directory. After each: nothing
half-written (every row has its vector and the hash of its own content, the keyword statistics
match the rows, no orphan row), nothing acknowledged lost, and the interrupted work completes when
run again, with no duplicate.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from mcp import Client
from support.clients import call_ok
from support.postmaster import (
    gone,
    postmaster_pid,
    postmasters,
    release_embedded,
    signal_postmaster,
    wait_until,
)
from support.processes import MEMLANE, serve, server_env

from memlane.pipeline.store.embedded import EmbeddedPostgres
from memlane.pipeline.validate import content_hash

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CONNECT_TIMEOUT = 2  # database.connect_timeout of the servers here


def assert_consistent(dsn: str) -> int:
    """Nothing half-written anywhere; returns the number of memories."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT content, occurred_at, content_hash, embedding IS NULL FROM memories"
        ).fetchall()
        for content, occurred_at, stored_hash, no_vector in rows:
            assert not no_vector, f"a memory without its vector: {content!r}"
            assert stored_hash == content_hash(content, occurred_at), f"a stale content hash: {content!r}"
        orphans = conn.execute(
            "SELECT count(*) FROM memory_access a WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = a.memory_id)"
        ).fetchone()[0]
        assert orphans == 0, "memory_access rows of no memory"
        # The keyword arm's statistics, kept by triggers, match the rows exactly.
        bad_projects = conn.execute(
            "SELECT count(*) FROM (SELECT project, count(*) AS docs, sum(length(tsv)) AS lexemes FROM memories"
            " GROUP BY project) m FULL JOIN memlane_projects p USING (project)"
            " WHERE m.docs IS DISTINCT FROM p.docs OR m.lexemes IS DISTINCT FROM p.lexemes"
        ).fetchone()[0]
        assert bad_projects == 0, "memlane_projects does not match the memories"
        bad_lexemes = conn.execute(
            "SELECT count(*) FROM (SELECT project, lx AS lexeme, count(*) AS df FROM memories,"
            " unnest(tsvector_to_array(tsv)) AS lx GROUP BY 1, 2) m FULL JOIN memlane_lexemes l USING (project, lexeme)"
            " WHERE m.df IS DISTINCT FROM l.df"
        ).fetchone()[0]
        assert bad_lexemes == 0, "memlane_lexemes does not match the memories"
        return len(rows)


def count(dsn: str, project: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            return conn.execute("SELECT count(*) FROM memories WHERE project = %s", (project,)).fetchone()[0]
        except psycopg.errors.UndefinedTable:  # not migrated yet
            return 0


# -- PostgreSQL stopped and restarted under a running HTTP server -----------------------------------


async def test_an_http_server_fails_fast_while_its_database_is_down_and_works_again_after(own_data_dir):
    """An external PostgreSQL (the pgserver binaries, started by the test) is stopped under a
    running ``memlane serve --transport http``: every call during the outage fails within the
    connect timeout with "database unavailable ... retry", and once the database is back the same
    server (not restarted) answers again, with everything stored before."""
    dsn = EmbeddedPostgres(own_data_dir).start()
    env = server_env(
        Path(tempfile.mkdtemp(prefix="memlane-test-faults-unused-")),
        MEMLANE_DATABASE__URL=dsn,
        MEMLANE_DATABASE__CONNECT_TIMEOUT=str(CONNECT_TIMEOUT),
    )
    with serve(env, log=own_data_dir / "server.log") as server:
        async with Client(server.url) as client:
            await call_ok(
                client, "remember", {"content": "The invoice service is written in Go", "project": "p"}
            )
            pid = signal_postmaster(own_data_dir, signal.SIGINT)  # a fast shutdown
            wait_until(lambda: gone(pid), 30, "PostgreSQL stops")

            times = []
            for tool, args in [
                ("recall", {"query": "what language is the invoice service in?", "project": "p"}),
                ("remember", {"content": "The invoice service deploys on Fridays", "project": "p"}),
                ("recall", {"query": "what language is the invoice service in?", "project": "p"}),
            ]:
                t0 = time.monotonic()
                r = await client.call_tool(tool, args)
                times.append(time.monotonic() - t0)
                text = r.content[0].text
                assert r.is_error, f"{tool} succeeded with the database down"
                assert "database unavailable" in text and "retry" in text, text
                assert "unexpectedly" not in text and "PoolTimeout" not in text, text
            print(f"\ncalls during the outage failed after {[round(t, 2) for t in times]} s")
            assert max(times) < CONNECT_TIMEOUT + 6, times

            EmbeddedPostgres(own_data_dir).start()  # the administrator brings it back
            deadline = time.monotonic() + 30
            while (
                r := await client.call_tool("recall", {"query": "invoice service language", "project": "p"})
            ).is_error:
                assert time.monotonic() < deadline, r.content[0].text
                await asyncio.sleep(0.2)
            assert r.structured_content["memories"][0]["content"] == "The invoice service is written in Go"
            out = await call_ok(
                client, "remember", {"content": "The invoice service deploys on Fridays", "project": "p"}
            )
            assert out["status"] == "created"  # the attempt during the outage stored nothing
        assert server.proc.poll() is None, "the server was not supposed to exit"
    assert assert_consistent(dsn) == 2


# -- SIGKILL in the middle of writing ---------------------------------------------------------------

IMPORT_LINES = 1500


def write_import_file(path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(IMPORT_LINES):
            line = {
                "content": f"Import line {i}: ticket OPS-{i} was closed by team {i % 17} after review",
                "project": "imported",
                "tags": [f"team-{i % 17}"],
                "metadata": {"line": i},
                "occurred_at": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
            }
            f.write(json.dumps(line) + "\n")


def test_import_killed_mid_file_leaves_whole_batches_and_a_rerun_completes_it_without_duplicates(
    own_data_dir,
):
    dsn = EmbeddedPostgres(own_data_dir).start()  # the import joins it; the kill leaves it running
    src = own_data_dir / "big.jsonl"
    write_import_file(src)
    cmd = [MEMLANE, "import", str(src), "--batch-size", "50"]
    env = server_env(own_data_dir)
    with open(own_data_dir / "import.log", "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(
                lambda: proc.poll() is not None or count(dsn, "imported") >= 200, 300, "batches are committed"
            )
            assert proc.poll() is None, "the import finished before it could be killed"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == -signal.SIGKILL
    n = assert_consistent(dsn)
    print(f"\nkilled after {n} of {IMPORT_LINES} lines were stored")
    assert 200 <= n < IMPORT_LINES and n % 50 == 0, f"{n}: not whole batches of 50"

    rerun = subprocess.run([*cmd, "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    summary = json.loads(rerun.stdout.strip().splitlines()[-1])
    counts = {k: summary[k] for k in ("read", "stored", "duplicate", "skipped")}
    assert counts == {"read": IMPORT_LINES, "stored": IMPORT_LINES - n, "duplicate": n, "skipped": 0}
    assert assert_consistent(dsn) == IMPORT_LINES
    with psycopg.connect(dsn) as conn:
        lines = conn.execute("SELECT (metadata->>'line')::int FROM memories").fetchall()
    assert sorted(r[0] for r in lines) == list(range(IMPORT_LINES)), "a line is missing or stored twice"


async def test_a_server_killed_mid_remembers_keeps_every_acknowledged_one_once_and_nothing_half(own_data_dir):
    """Four MCP clients send remembers to one HTTP server; it is killed (SIGKILL) once some are
    acknowledged. Every acknowledged memory is there exactly once, nothing is half-written, and
    sending everything again to a new server completes the set without a duplicate."""
    dsn = EmbeddedPostgres(own_data_dir).start()
    env = server_env(own_data_dir)
    sent: list[str] = []
    acknowledged: list[str] = []

    async def writer(url: str, w: int, stop: asyncio.Event) -> None:
        async with Client(url) as client:
            for i in range(10_000):
                if stop.is_set():
                    return
                content = f"Writer {w} remembers fact number {i} about the release train"
                sent.append(content)
                r = await asyncio.wait_for(
                    client.call_tool("remember", {"content": content, "project": "w"}), 60
                )
                assert not r.is_error, r.content[0].text
                acknowledged.append(content)

    with serve(env, log=own_data_dir / "server.log") as server:
        async with Client(server.url) as client:  # the model is loaded before the writers start
            await call_ok(client, "remember", {"content": "Warm-up memory", "project": "warm"})
        stop = asyncio.Event()
        tasks = [asyncio.create_task(writer(server.url, w, stop)) for w in range(4)]
        deadline = time.monotonic() + 120
        while len(acknowledged) < 40:
            assert time.monotonic() < deadline and not any(t.done() for t in tasks), "the writers stalled"
            await asyncio.sleep(0.02)
        os.kill(server.proc.pid, signal.SIGKILL)
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
        server.proc.wait(timeout=30)
    assert any(isinstance(r, BaseException) for r in results), "no call was in flight when the server died"
    print(f"\nkilled with {len(acknowledged)} acknowledged of {len(sent)} sent")

    assert_consistent(dsn)
    with psycopg.connect(dsn) as conn:
        stored = [r[0] for r in conn.execute("SELECT content FROM memories WHERE project = 'w'").fetchall()]
    assert len(stored) == len(set(stored))
    missing = set(acknowledged) - set(stored)
    assert not missing, f"acknowledged but lost: {sorted(missing)[:5]}"
    assert set(stored) <= set(sent)

    with serve(env, log=own_data_dir / "server.log") as server:
        async with Client(server.url) as client:
            statuses = [
                (await call_ok(client, "remember", {"content": c, "project": "w"}))["status"] for c in sent
            ]
    assert statuses.count("duplicate") == len(stored) and statuses.count("created") == len(sent) - len(stored)
    assert assert_consistent(dsn) == len(sent) + 1  # + the warm-up memory
    assert count(dsn, "w") == len(sent)


# -- two processes on one embedded data directory ---------------------------------------------------


async def test_killing_the_process_that_started_the_embedded_database_leaves_the_other_working(own_data_dir):
    env = server_env(own_data_dir)
    with serve(env, log=own_data_dir / "a.log") as a, serve(env, log=own_data_dir / "b.log") as b:
        async with Client(a.url) as client:
            await call_ok(client, "remember", {"content": "Server A stored this first", "project": "p"})
        pm = postmaster_pid(own_data_dir)
        assert pm is not None and postmasters(own_data_dir) == [pm]
        async with Client(b.url) as client:
            await call_ok(client, "recall", {"query": "what did server A store?", "project": "p"})

            os.kill(a.proc.pid, signal.SIGKILL)  # the process that started PostgreSQL
            a.proc.wait(timeout=30)
            deadline = time.monotonic() + 30
            while (
                r := await client.call_tool(
                    "remember", {"content": "Server B stored this after", "project": "p"}
                )
            ).is_error:
                assert time.monotonic() < deadline, r.content[0].text
                await asyncio.sleep(0.2)
            found = await call_ok(
                client, "recall", {"query": "what did server A store first?", "project": "p"}
            )
            assert "Server A stored this first" in [m["content"] for m in found["memories"]]
        assert b.proc.poll() is None
        assert len(postmasters(own_data_dir)) == 1
    # B has exited cleanly too: the last process out stops PostgreSQL, though A never deregistered.
    wait_until(lambda: not postmasters(own_data_dir), 30, "the last memlane process out stops PostgreSQL")


# -- a read-only data directory -----------------------------------------------------------------------


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """``path`` mounted read-only on itself (chmod does not stop root, which the tests may run as)."""
    try:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(
            f"cannot bind-mount to make a read-only directory here ({e}); needs root with CAP_SYS_ADMIN"
        )
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True, capture_output=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.parametrize("state", ["empty", "initialised"])
def test_a_read_only_data_directory_is_a_clear_error_and_nothing_is_damaged(own_data_dir, state):
    data = own_data_dir / "data"
    data.mkdir()
    env = server_env(data)
    if state == "initialised":
        first = subprocess.run(
            [MEMLANE, "remember", "Kept before the directory went read-only"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert first.returncode == 0, first.stderr[-2000:]
        wait_until(lambda: not postmasters(data), 30, "the CLI's PostgreSQL stops")
    with read_only(data):
        r = subprocess.run(
            [MEMLANE, "remember", "Written to a read-only directory"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode != 0
        assert "Traceback" not in r.stderr, r.stderr[-3000:]
        assert "read-only" in r.stderr.lower() or "read only" in r.stderr.lower(), r.stderr[-3000:]
        assert not postmasters(data)
    if state == "initialised":  # writable again: everything is there and works
        r = subprocess.run(
            [MEMLANE, "recall", "what was kept?", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-2000:]
        assert json.loads(r.stdout)["memories"][0]["content"] == "Kept before the directory went read-only"


# -- a full disk ------------------------------------------------------------------------------------


@contextmanager
def tiny_disk(path: Path, size: str) -> Iterator[None]:
    path.mkdir()
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=1777", "tmpfs", str(path)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot mount a small tmpfs to fill here ({e}); needs root with CAP_SYS_ADMIN")
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> Path:
    """Take every free byte of the file system under ``path``."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 20, 4096, 1):
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


async def test_a_full_disk_is_a_clear_error_on_write_and_nothing_is_lost_or_corrupted(own_data_dir):
    """The data directory on a small tmpfs, filled up under a running server: remembers fail with
    an error that says the database could not write (no traceback, no hang), reads keep working,
    and once space is freed the same server stores again; every acknowledged memory is intact."""
    data = own_data_dir / "disk"
    with tiny_disk(data, "160m"):
        env = server_env(data)
        with serve(env, log=own_data_dir / "server.log") as server:
            async with Client(server.url) as client:
                await call_ok(client, "remember", {"content": "Stored while there was room", "project": "p"})
                filler = fill(data)
                big = "A long note about the storage budget. " * 500  # ~19k characters: new pages
                acknowledged, error = [], None
                for i in range(200):
                    r = await asyncio.wait_for(
                        client.call_tool(
                            "remember", {"content": f"{i} {big}", "project": "p", "metadata": {"i": i}}
                        ),
                        120,
                    )
                    if r.is_error:
                        error = r.content[0].text
                        break
                    acknowledged.append(i)
                assert error is not None, "200 large remembers fit on a full disk"
                print(f"\nafter {len(acknowledged)} more remembers: {error}")
                assert "No space left on device" in error or "disk" in error.lower(), error
                assert "unexpectedly" not in error and "Traceback" not in error, error

                filler.unlink()  # the administrator frees space
                deadline = time.monotonic() + 60
                while (
                    r := await client.call_tool(
                        "remember", {"content": "Stored after space was freed", "project": "p"}
                    )
                ).is_error:
                    assert time.monotonic() < deadline, r.content[0].text
                    await asyncio.sleep(0.5)
                found = await call_ok(
                    client, "recall", {"query": "what was stored while there was room?", "project": "p"}
                )
                assert "Stored while there was room" in [m["content"] for m in found["memories"]]
            assert server.proc.poll() is None
            dsn = EmbeddedPostgres(data).start()
            assert assert_consistent(dsn) == 2 + len(acknowledged)
            with psycopg.connect(dsn) as conn:
                stored = {
                    r[0]
                    for r in conn.execute("SELECT (metadata->>'i')::int FROM memories WHERE metadata ? 'i'")
                }
            assert stored == set(acknowledged)
        release_embedded(data)
