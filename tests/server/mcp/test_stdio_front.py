"""``memlane serve`` over stdio answers ``initialize`` / ``server/discover`` and ``tools/list`` from
the start-up cache while the SDK loads (server/mcp/stdio_front.py): the same answers as the SDK's,
a session that works afterwards, with either protocol generation, and a cache that follows the
settings."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support.clients import call_ok
from support.processes import MEMLANE, initialize, server_env, stdio_params

from memlane.server.mcp import stdio_front

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _tools(listed) -> list[dict[str, Any]]:
    return [t.model_dump(mode="json") for t in listed.tools]


async def test_a_second_spawn_answers_from_the_cache_what_the_sdk_answered(tmp_path):
    data = tmp_path / "data"
    runs = []
    for i in range(2):
        log = tmp_path / f"stderr-{i}.log"
        with open(log, "w") as errlog:
            from mcp.client.stdio import stdio_client

            async with Client(stdio_client(stdio_params(data), errlog=errlog)) as client:
                listed = _tools(await client.list_tools())
                stored = await call_ok(client, "remember", {"content": f"Spawn {i} keeps the billing notes"})
                found = await call_ok(client, "recall", {"query": f"spawn {i} billing notes"})
        runs.append((listed, stored, found, log.read_text()))
    (first, _, _, log0), (second, stored, found, log1) = runs
    assert first == second and {t["name"] for t in first} >= {"remember", "recall", "ingest"}
    assert "from the start-up cache" not in log0  # the first start met no cache and filled it
    assert "answered server/discover, tools/list from the start-up cache" in log1
    # The SDK's session works afterwards (recall names memories by a short handle of their id).
    assert any(stored["id"].startswith(m["id"]) for m in found["memories"])
    assert len(list((data / "cache").glob("stdio-*.json"))) == 1


def _session(data: Path, tmp_path: Path, tag: str) -> tuple[list[dict], str]:
    """The 2025 handshake by hand: initialize, initialized, tools/list, a recall; every stdout line."""
    err = open(tmp_path / f"stderr-{tag}.log", "wb")
    proc = subprocess.Popen(
        [MEMLANE, "serve"], env=server_env(data), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
    )
    out: list[dict] = []
    try:
        for msg in (
            initialize("t"),
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "recall", "arguments": {"query": "x y"}},
            },
        ):
            proc.stdin.write((json.dumps(msg) + "\n").encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while len([m for m in out if "id" in m]) < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            out.append(json.loads(line))  # every stdout line is JSON-RPC
        proc.stdin.close()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        err.close()
    return out, (tmp_path / f"stderr-{tag}.log").read_text()


def test_the_2025_handshake_from_the_cache_leaves_the_sdk_session_initialised(tmp_path):
    data = tmp_path / "data"
    miss, log0 = _session(data, tmp_path, "miss")
    hit, log1 = _session(data, tmp_path, "hit")
    by_id = [{m["id"]: m for m in run if "id" in m} for run in (miss, hit)]
    assert by_id[0][1]["result"] == by_id[1][1]["result"]  # initialize, negotiated 2025-11-25
    assert by_id[1][1]["result"]["protocolVersion"] == "2025-11-25"
    assert by_id[0][2]["result"] == by_id[1][2]["result"]  # tools/list
    assert "answered initialize, tools/list from the start-up cache" in log1 and "start-up cache" not in log0
    assert "result" in by_id[1][3] and by_id[1][3]["result"]["isError"] is False  # a tools/call, via the SDK
    assert stdio_front.FRONT_ID not in json.dumps(hit)  # the SDK's reply to our initialize stayed inside


@pytest.mark.parametrize(
    ("argv", "env", "stdio"),
    [
        (["serve"], {}, True),
        (["--data-dir", "/d", "serve"], {}, True),
        (["serve", "--transport", "http"], {}, False),
        (["serve", "--transport=sse"], {}, False),
        (["serve"], {"MEMLANE_SERVER__TRANSPORT": "http"}, False),
        (["recall", "serve"], {}, False),
        (["serve", "--help"], {}, False),
    ],
)
def test_the_front_takes_the_wire_only_for_stdio(argv, env, stdio, monkeypatch):
    monkeypatch.delenv("MEMLANE_SERVER__TRANSPORT", raising=False)
    monkeypatch.delenv("MEMLANE_CONFIG", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert stdio_front._serves_stdio(argv) is stdio


def test_a_config_file_that_serves_http_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv("MEMLANE_SERVER__TRANSPORT", raising=False)
    cfg = tmp_path / "m.toml"
    cfg.write_text('[server]\ntransport = "http"\n')
    assert stdio_front._serves_stdio(["--config", str(cfg), "serve"]) is False
    cfg.write_text("[server]\nlog_level = 'INFO'\n")
    assert stdio_front._serves_stdio(["--config", str(cfg), "serve"]) is True


def test_the_cache_file_follows_settings_and_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path))
    base = stdio_front.cache_path(["serve"])
    assert base.parent == tmp_path / "cache"
    assert stdio_front.cache_path(["serve"]) == base  # stable
    monkeypatch.setenv("MEMLANE_RECALL__DEFAULT_LIMIT", "5")
    changed = stdio_front.cache_path(["serve"])
    assert changed != base
    cfg = tmp_path / "m.toml"
    cfg.write_text("[recall]\ndefault_limit = 7\n")
    with_config = stdio_front.cache_path(["--config", str(cfg), "serve"])
    cfg.write_text("[recall]\ndefault_limit = 8\n")
    assert stdio_front.cache_path(["--config", str(cfg), "serve"]) != with_config
