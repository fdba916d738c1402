"""What a person sees when memlane starts: ``memlane --version``, the first line ``serve`` writes to
stderr (version, transport, where the memories are, how to connect a client), a note when stdin is
a terminal, and one line for a new store instead of one per migration."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from support.processes import MEMLANE, initialize, run_memlane, server_env

from memlane.pipeline.store.migrate import latest_version
from memlane.server.mcp.banner import at_a_terminal, command_as_typed, first_line
from memlane.server.settings import Settings


@pytest.mark.slow
def test_version_comes_from_the_package_metadata(tmp_path):
    done = run_memlane("--version", env=server_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"memlane {version('memlane')}"


def _serve_once(env: dict[str, str]) -> str:
    """``memlane serve`` over pipes: one initialize answered, stdin closed; returns its stderr."""
    proc = subprocess.run(
        [MEMLANE, "serve"],
        input=(json.dumps(initialize()) + "\n").encode(),
        env=env,
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert json.loads(proc.stdout.splitlines()[0])["id"] == 1
    return proc.stderr.decode()


@pytest.mark.slow
def test_the_first_line_says_version_data_dir_transport_and_how_to_connect(tmp_path):
    data = tmp_path / "memories"
    # As after `make run`: the venv's bin is not on PATH, so `memlane` alone is not a command.
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if Path(p) != Path(MEMLANE).parent
    )
    env = server_env(data, PATH=path)
    first = _serve_once(env)
    # The engine starts in the background: the store may be created after the first answer and
    # stdin's end, so a tool call's worth of start-up is what the second run checks.
    banner = next(line for line in first.splitlines() if "serving stdio" in line)
    assert f"memlane {version('memlane')}" in banner
    assert str(data) in banner and "embedded PostgreSQL" in banner
    # MEMLANE is the venv's, not on the tests' PATH: the banner names its path, not `memlane`.
    assert "`memlane setup" not in banner and ".venv/bin/memlane setup claude-desktop`" in banner, banner
    assert "waiting for an MCP client on stdin" not in first  # stdin is a pipe: a client
    done = run_memlane("recall", "anything", env=env)  # runs the migrations if the serve did not
    # A fresh store has no project: recall says so to the person and exits 2.
    assert done.returncode == 2 and "There are no memories yet" in done.stderr, done.stderr
    second = _serve_once(env)
    for log in (first, done.stderr, second):
        assert "applied migration" not in log  # debug level: one line says it, below
    created = f"created a new store (schema version {latest_version()})"
    assert (first + done.stderr).count(created) <= 1
    assert created not in second
    assert "serving stdio" in second


@pytest.mark.slow
def test_at_a_terminal_serve_says_it_waits_for_a_client_and_ctrl_d_stops_it(tmp_path, database_url):
    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [MEMLANE, "serve"], stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    os.close(follower)
    try:
        err = b""
        deadline = time.monotonic() + 120
        while b"Stop with Ctrl-C" not in err:
            assert time.monotonic() < deadline, err.decode()
            ready, _, _ = select.select([proc.stderr], [], [], 1)
            if ready:
                chunk = os.read(proc.stderr.fileno(), 4096)
                assert chunk, f"serve exited ({proc.poll()}): {err.decode()}"
                err += chunk
        text = err.decode()
        assert "waiting for an MCP client on stdin" in text
        assert "memlane setup claude-desktop" in text
        os.write(leader, b"\x04")  # Ctrl-D: end of input, as a client closing the pipe
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)


def test_the_first_line_names_an_external_database_without_its_password(tmp_path):
    settings = Settings(
        data_dir=tmp_path, database={"url": "postgresql://mem:hunter2secret@db.internal:6543/memory"}
    )
    line = first_line(settings, "http", "127.0.0.1", 8765)
    assert "db.internal:6543/memory" in line and "external PostgreSQL" in line
    assert "hunter2secret" not in line
    assert "http://127.0.0.1:8765/mcp" in line
    sse = first_line(settings, "sse", "127.0.0.1", 8765)
    assert "deprecated" in sse and "/sse" in sse
    assert str(Path(tmp_path)) not in line


def _console_script(folder: Path) -> Path:
    script = folder / "bin" / "memlane"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_the_banner_names_the_venvs_memlane_when_it_is_not_on_path(tmp_path, monkeypatch):
    """After ``make run`` memlane is .venv/bin/memlane and no shell finds ``memlane``: the command
    the banner gives must be one a person can paste."""
    script = _console_script(tmp_path / "checkout" / ".venv")
    monkeypatch.setattr("sys.argv", [str(script), "serve"])
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    settings = Settings(data_dir=tmp_path / "data")
    monkeypatch.chdir(tmp_path / "checkout")
    assert "`.venv/bin/memlane setup claude-desktop`" in first_line(settings, "stdio", "", 0)
    monkeypatch.chdir(script.parent)
    assert "`./memlane setup claude-desktop`" in first_line(settings, "stdio", "", 0)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    line = first_line(settings, "stdio", "", 0)
    assert f"`{script.resolve()} setup claude-desktop`" in line
    note = at_a_terminal(command_as_typed())
    assert f"`{script.resolve()} setup claude-desktop`" in note
    assert f"inspector {script.resolve()} serve`" in note


def test_a_path_with_a_space_is_quoted_as_a_shell_takes_it(tmp_path, monkeypatch):
    script = _console_script(tmp_path / "my checkout" / ".venv")
    monkeypatch.setattr("sys.argv", [str(script), "serve"])
    monkeypatch.setenv("PATH", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)
    line = first_line(Settings(data_dir=tmp_path / "data"), "stdio", "", 0)
    assert "`'my checkout/.venv/bin/memlane' setup claude-desktop`" in line


def test_the_banner_says_plain_memlane_when_that_is_the_one_on_path(tmp_path, monkeypatch):
    script = _console_script(tmp_path / "venv")
    monkeypatch.setattr("sys.argv", [str(script), "serve"])
    monkeypatch.setenv("PATH", str(script.parent))
    line = first_line(Settings(data_dir=tmp_path / "data"), "stdio", "", 0)
    assert "connect a client with `memlane setup claude-desktop`" in line
    other = _console_script(tmp_path / "other")  # a different memlane first on PATH: not this one
    monkeypatch.setenv("PATH", str(other.parent))
    assert f"`{script.resolve()} setup claude-desktop`" in first_line(
        Settings(data_dir=tmp_path / "data"), "stdio", "", 0
    )
