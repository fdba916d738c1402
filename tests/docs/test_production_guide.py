"""docs/production.md's first steps, run as written, in order, on a fresh store: its shell blocks up
to the first ``memlane serve``, with only the placeholders a reader replaces (the database's URL,
the port) swapped for the test's. The guide once served on 0.0.0.0 before creating the token that
such a server needs, so its first example refused to start."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from support.processes import free_port, initialize, stop

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "production.md"
URL_LINE = re.compile(r"^export MEMLANE_DATABASE__URL='[^']+'$", re.M)


def first_steps(text: str) -> list[str]:
    """The command lines of the guide's ``sh`` blocks, in order, up to its first ``memlane serve``."""
    lines: list[str] = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        for line in block.splitlines():
            if line.strip():
                lines.append(line)
            if line.lstrip().startswith("memlane serve"):
                return lines
    raise AssertionError("no `memlane serve` in the guide's sh blocks")


def test_first_steps_stop_at_the_first_serve():
    text = (
        "```sh\nexport A=1\n```\nprose\n```sh\nmemlane token create\nmemlane serve --port 1\nmemlane x\n```\n"
    )
    assert first_steps(text) == ["export A=1", "memlane token create", "memlane serve --port 1"]


def _post(url: str, body: dict, token: str | None) -> int:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.slow
@pytest.mark.empty_database
def test_the_guides_first_steps_serve_on_a_fresh_store(tmp_path, database_url):
    steps = first_steps(GUIDE.read_text(encoding="utf-8"))
    assert any(URL_LINE.match(line) for line in steps), steps  # the placeholder this test replaces
    assert "--port 8080" in steps[-1], steps[-1]
    port = free_port()
    script = [URL_LINE.sub(f"export MEMLANE_DATABASE__URL='{database_url}'", line) for line in steps]
    script[-1] = "exec " + script[-1].replace("--port 8080", f"--port {port}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env["MEMLANE_DATA_DIR"] = str(tmp_path / "data")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    log, out = tmp_path / "stderr", tmp_path / "stdout"
    with open(log, "wb") as err, open(out, "wb") as stdout:
        proc = subprocess.Popen(
            ["bash", "-euc", "\n".join(script)], env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=err
        )
    try:
        deadline = time.monotonic() + 120
        status = None
        while status != 200:
            assert proc.poll() is None, f"exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as ready:
                    status = ready.status
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        # The token the guide created, the last line `token create` printed, opens the server; no
        # token does not.
        token = out.read_text().strip().splitlines()[-1]
        mcp = f"http://127.0.0.1:{port}/mcp"
        assert _post(mcp, initialize(), None) == 401
        assert _post(mcp, initialize(), token) == 200
    finally:
        stop(proc)
