"""Read replicas (database.read_urls): recall reads a streaming hot standby made with
``pg_basebackup -R``, waits (bounded) for the caller's last write to be replayed there, and reads
the primary, with no error to the client, when the standby is behind, paused or stopped.

The module has its own primary and standby: the tests stop and pause the standby."""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from pathlib import Path

import pytest
from pydantic import SecretStr
from support.clients import call_ok, in_process

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.store import replicas
from memlane.pipeline.store.standalone import StandalonePostgres
from memlane.server.settings import load

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SLACK_MS = 3000  # the machine is shared: a bound is checked loosely, never a latency


@pytest.fixture(scope="module")
def cluster():
    primary = StandalonePostgres(Path(tempfile.mkdtemp(prefix="memlane-test-primary-"))).init().start()
    standby = primary.standby(Path(tempfile.mkdtemp(prefix="memlane-test-standby-")))
    try:
        standby.wait_replaying(primary)
        yield primary, standby
    finally:
        standby.stop()
        primary.stop()


@pytest.fixture
def urls(cluster) -> tuple[str, str]:
    """A new database of the primary's (its role and database replicate), and the same URL on the
    standby's port."""
    primary, standby = cluster
    name = "app_" + uuid.uuid4().hex[:10]
    url = primary.create_app_database(name, name)
    return url, url.replace(f":{primary.port}/", f":{standby.port}/")


def _config(tmp_path, urls, wait_ms: float) -> EngineConfig:
    url, read_url = urls
    return EngineConfig(
        data_dir=tmp_path,
        database=DatabaseConfig(url=SecretStr(url), read_urls=[SecretStr(read_url)], replica_wait_ms=wait_ms),
    )


def _requests(eng: Engine) -> int:
    pool = eng.runtime.replicas.replicas[0].pool
    return pool.get_stats().get("requests_num", 0) if pool is not None else 0


async def _recall(eng: Engine, query: str):
    return await eng.recall(dict(query=query, explain=True))


async def test_remember_then_recall_at_once_reads_the_replica_and_finds_it(tmp_path, urls, embedder):
    eng = Engine(_config(tmp_path, urls, wait_ms=5000), embedder=embedder)
    await eng.open()
    try:
        for i in range(5):
            fact = f"the deploy key of service {i} is kept in vault path ops/{uuid.uuid4().hex[:8]}"
            await eng.remember({"content": fact})
            before = _requests(eng)
            res = await _recall(eng, f"deploy key of service {i}")
            trace = res.trace.as_dict()
            assert trace["read_from"] == "replica", trace
            assert 0 <= trace["read_wait_ms"] <= 5000 + SLACK_MS
            assert _requests(eng) > before  # the reads did go to the replica's pool
            assert fact in [m.content for m, _ in res.memories]
    finally:
        await eng.close()


async def test_a_paused_replica_is_waited_for_a_bounded_time_then_the_primary_answers(
    tmp_path, urls, cluster, embedder
):
    _, standby = cluster
    eng = Engine(_config(tmp_path, urls, wait_ms=300), embedder=embedder)
    await eng.open()
    standby.execute("SELECT pg_wal_replay_pause()")
    try:
        fact = "the staging database was moved to the eu-west region"
        await eng.remember({"content": fact})
        res = await _recall(eng, "where is the staging database")
        trace = res.trace.as_dict()
        assert trace["read_from"] == "primary", trace
        assert "had not replayed" in trace["read_reason"]
        assert 300 * 0.9 <= trace["read_wait_ms"] <= 300 + SLACK_MS
        assert fact in [m.content for m, _ in res.memories]
        # Another caller, who wrote nothing, reads the paused replica: it has not seen the memory,
        # which shows the replica (not the primary) answered it.
        token = replicas.CALLER.set("someone-else")
        try:
            other = await _recall(eng, "where is the staging database")
        finally:
            replicas.CALLER.reset(token)
        assert other.trace.as_dict()["read_from"] == "replica"
        assert fact not in [m.content for m, _ in other.memories]
    finally:
        standby.execute("SELECT pg_wal_replay_resume()")
        await eng.close()


async def test_a_write_through_one_server_is_waited_for_by_the_next_recall_through_another(
    tmp_path, urls, cluster, embedder
):
    """Two servers on one primary and standby (a round-robin balancer's): the caller's write goes to
    one, its recall to the other, which has no record of that write itself."""
    _, standby = cluster
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    one = Engine(_config(tmp_path / "one", urls, wait_ms=300), embedder=embedder)
    two = Engine(_config(tmp_path / "two", urls, wait_ms=300), embedder=embedder)
    await one.open()
    await two.open()
    token = replicas.CALLER.set("token:alice")
    standby.execute("SELECT pg_wal_replay_pause()")
    try:
        fact = "the billing service's queue was renamed to invoices-v2"
        await one.remember({"content": fact})
        res = await _recall(two, "what is the billing queue called")
        trace = res.trace.as_dict()
        assert trace["read_from"] == "primary", trace
        assert "had not replayed" in trace["read_reason"]
        assert 300 * 0.9 <= trace["read_wait_ms"] <= 300 + SLACK_MS
        assert fact in [m.content for m, _ in res.memories]
        # Another caller reads the paused standby through the same server: it has not the memory yet.
        other = replicas.CALLER.set("token:bob")
        try:
            res = await _recall(two, "what is the billing queue called")
        finally:
            replicas.CALLER.reset(other)
        assert res.trace.as_dict()["read_from"] == "replica"
        assert fact not in [m.content for m, _ in res.memories]
        standby.execute("SELECT pg_wal_replay_resume()")
        res = await _recall(two, "what is the billing queue called")  # replayed: the standby answers
        assert res.trace.as_dict()["read_from"] == "replica", res.trace.as_dict()
        assert fact in [m.content for m, _ in res.memories]
    finally:
        replicas.CALLER.reset(token)
        standby.execute("SELECT pg_wal_replay_resume()")
        await one.close()
        await two.close()


async def test_a_replica_lost_in_the_middle_of_a_recall_means_the_recall_runs_again_on_the_primary(
    tmp_path, urls, cluster, embedder
):
    primary, standby = cluster
    eng = Engine(_config(tmp_path, urls, wait_ms=5000), embedder=embedder)
    await eng.open()
    try:
        fact = "the build cache is pruned every sunday night"
        await eng.remember({"content": fact})
        token = replicas.CALLER.set("a-reader")  # no write recorded: no replay wait, straight to the reads
        try:
            assert (await _recall(eng, "when is the build cache pruned")).trace.read["read_from"] == "replica"
            # The replica's pooled connections die under the pool (as in a standby restart), so the
            # recall's first read on the replica fails.
            role = urls[0].split("//")[1].split(":")[0]
            standby.execute(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role}'"
            )
            res = await _recall(eng, "when is the build cache pruned")
        finally:
            replicas.CALLER.reset(token)
        assert res.trace.read["read_from"] == "primary", res.trace.read
        assert res.trace.read["read_reason"] == "replica failed during the recall"
        assert fact in [m.content for m, _ in res.memories]
    finally:
        await eng.close()


async def test_over_mcp_a_stopped_replica_means_the_primary_answers_then_the_replica_again(
    tmp_path, urls, cluster, embedder
):
    _, standby = cluster
    url, read_url = urls
    settings = load(
        None,
        data_dir=tmp_path,
        database=DatabaseConfig(url=SecretStr(url), read_urls=[SecretStr(read_url)], replica_wait_ms=5000),
    )
    async with in_process(settings, embedder=embedder) as client:
        await call_ok(client, "remember", {"content": "the on-call rotation changes every monday"})
        out = await call_ok(client, "recall", {"query": "when does on-call rotate", "explain": True})
        assert out["trace"]["read_from"] == "replica", out["trace"]
        assert "monday" in str(out["memories"])

        standby.stop()
        try:
            await call_ok(client, "remember", {"content": "the release freeze starts on the 20th"})
            for _ in range(3):  # the first finds the dead connections, the next skip the replica
                out = await call_ok(
                    client, "recall", {"query": "when is the release freeze", "explain": True}
                )
                assert out["trace"]["read_from"] == "primary", out["trace"]
                assert "read_reason" in out["trace"]
                assert "20th" in str(out["memories"])
        finally:
            standby.start()

        # Back: probed again after replicas.DOWN_S, then read again.
        read_from = None
        for _ in range(int(replicas.DOWN_S * 10) + 100):
            out = await call_ok(client, "recall", {"query": "when is the release freeze", "explain": True})
            read_from = out["trace"]["read_from"]
            if read_from == "replica":
                break
            await asyncio.sleep(0.1)
        assert read_from == "replica", out["trace"]
        assert "20th" in str(out["memories"])


def test_doctor_shows_each_replica_and_its_lag(urls, tmp_path, capsys, monkeypatch):
    from memlane.server.cli.main import main

    url, read_url = urls
    monkeypatch.setenv("MEMLANE_DATABASE__URL", url)
    monkeypatch.setenv("MEMLANE_DATABASE__READ_URLS", json.dumps([read_url]))
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path))
    code = main(["doctor", "--json"])
    out = capsys.readouterr().out
    report = json.loads(out)
    [replica] = report["read_replicas"]
    assert code == 0 and replica["up"] is True and replica["lag_bytes"] >= 0, report
    assert read_url.split("@")[1] == replica["replica"]  # host:port/db, no credentials
    assert url.split(":")[2].split("@")[0] not in out  # the password


def test_the_caller_of_a_tool_call_is_its_mcp_session_else_the_one_local_client(tmp_path):
    from types import SimpleNamespace

    from memlane.server.mcp.state import State
    from memlane.server.settings import Settings

    state = State(Settings(data_dir=tmp_path))
    assert state.caller_key(None) == replicas.LOCAL_CALLER  # stdio, the CLI
    assert state.caller_key(SimpleNamespace(headers=None)) == replicas.LOCAL_CALLER
    assert state.caller_key(SimpleNamespace(headers={"mcp-session-id": "abc"})) == "session:abc"
