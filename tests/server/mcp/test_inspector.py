"""The official MCP Inspector CLI against ``memlane serve`` over stdio: what a user sees when they
check the server with the reference client."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.processes import MEMLANE, ROOT

pytestmark = pytest.mark.slow

INSPECTOR = ROOT / "node_modules" / ".bin" / "mcp-inspector"

if not INSPECTOR.exists():
    pytest.skip(
        f"MCP Inspector CLI not installed ({INSPECTOR} is missing; run `make node_modules/.bin/mcp-inspector`)",
        allow_module_level=True,
    )
if shutil.which("node") is None:
    pytest.skip("node is not on PATH; the MCP Inspector CLI needs it", allow_module_level=True)


def inspector(data_dir: Path, *args: str) -> tuple[int, Any, str]:
    """Run the Inspector CLI against a fresh ``memlane serve`` on data_dir; returns (exit code, the
    parsed JSON result or None, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    cmd = [
        str(INSPECTOR),
        "--cli",
        "-q",
        "--format",
        "json",
        # The server gets only these variables (the Inspector does not pass its own environment on).
        "-e",
        f"MEMLANE_DATA_DIR={data_dir}",
        "-e",
        f"PATH={env.get('PATH', '')}",
        "-e",
        f"HOME={env.get('HOME', '')}",
        *args,
        "--",
        MEMLANE,
        "serve",
    ]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    out = r.stdout.strip()
    return r.returncode, (json.loads(out) if out else None), r.stderr


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("inspector") / "data"
    yield path
    # The Inspector stops the server with SIGTERM, which leaves the embedded PostgreSQL running
    # (see test_transports.py::test_sigterm_stops_the_server_and_the_embedded_database): stop it.
    pid_file = path / "pg" / "postmaster.pid"
    try:
        os.kill(int(pid_file.read_text().split()[0]), signal.SIGINT)
    except (OSError, ValueError, IndexError):
        return
    deadline = time.monotonic() + 30
    while pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_inspector_lists_the_four_memlane_tools(data_dir):
    rc, out, err = inspector(data_dir, "--method", "tools/list")
    assert rc == 0, err
    tools = {t["name"]: t for t in out["result"]["tools"]}
    assert set(tools) == {"remember", "recall", "forget", "update", "ingest"}
    assert tools["recall"]["annotations"]["readOnlyHint"] is True
    assert tools["forget"]["annotations"]["destructiveHint"] is True
    assert "content" in tools["remember"]["inputSchema"]["properties"]
    assert tools["recall"]["outputSchema"]["properties"]["memories"]["type"] == "array"


def test_inspector_recalls_what_it_remembered_in_structured_content(data_dir):
    memory = {
        "content": "The Inspector check found that Heidi approves all schema changes",
        "project": "inspector",
        "tags": ["review"],
        "priority": 4,
        "metadata": {"ticket": 77, "nested": {"ok": True, "none": None}},
    }
    rc, out, err = inspector(
        data_dir, "--method", "tools/call", "--tool-name", "remember", "--tool-args-json", json.dumps(memory)
    )
    assert rc == 0, err
    stored = out["result"]["structuredContent"]
    assert out["result"]["isError"] is False
    assert stored["status"] == "created" and stored["project"] == "inspector"

    query = {"query": "who approves schema changes?", "project": "inspector", "limit": 3}
    rc, out, err = inspector(
        data_dir, "--method", "tools/call", "--tool-name", "recall", "--tool-args-json", json.dumps(query)
    )
    assert rc == 0, err
    result = out["result"]
    assert result["isError"] is False
    [m] = result["structuredContent"]["memories"]
    assert stored["id"].startswith(m["id"])  # a handle: the id's unique start
    assert m["content"] == memory["content"]
    assert m["tags"] == ["review"] and m["priority"] == 4
    assert m["metadata"] == memory["metadata"]
    # The text content carries the same data for clients without structured output.
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
