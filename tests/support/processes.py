"""``memlane`` as a real subprocess: its environment, stdio parameters, an HTTP or SSE server on a
free port (started, waited for, stopped), and one-shot CLI runs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from mcp import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
MEMLANE = str(Path(sys.executable).with_name("memlane"))
CLI_TIMEOUT = 180  # seconds; generous for a loaded 2-core machine, never reached when things work


def initialize(client: str = "test", id: int | str = 1) -> dict:
    """A 2025-11-25 ``initialize`` request, for tests that speak JSON-RPC by hand."""
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on port {port} after {timeout}s") from None
            time.sleep(0.05)


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a memlane subprocess (stdio clients pass only what they are given)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env["MEMLANE_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


def stdio_params(data_dir: Path | None = None, *, env: dict[str, str] | None = None) -> StdioServerParameters:
    """``memlane serve`` over stdio on ``data_dir``, or with an environment of the caller's."""
    if env is None:
        env = server_env(data_dir)
    return StdioServerParameters(command=MEMLANE, args=["serve"], env=env)


def run_memlane(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MEMLANE, *args], env=env, capture_output=True, text=True, timeout=CLI_TIMEOUT)


def stop(proc: subprocess.Popen) -> None:
    """SIGINT (Ctrl-C), not SIGTERM: SIGTERM leaves the embedded PostgreSQL running (see
    test_sigterm_stops_the_server_and_the_embedded_database)."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@dataclass(frozen=True)
class Served:
    """A running ``memlane serve``: its port, process and stderr log; ``url`` is the MCP endpoint."""

    transport: str
    port: int
    proc: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/sse" if self.transport == "sse" else "/mcp")

    def wait_for_log(self, text: str, timeout_s: float = 60.0) -> None:
        """Block until ``text`` appears in the server's stderr log (it exits or times out: fail)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(
                    f"{text!r} never appeared in the server's log:\n{self.log.read_text()[-3000:]}"
                )
            time.sleep(0.1)


@contextmanager
def serve(
    env: dict[str, str], *, transport: str = "http", log: Path | None = None, stdout: Path | None = None
) -> Iterator[Served]:
    """``memlane serve --transport {http,sse}`` on a free port with ``env``: waits until it listens,
    stops it afterwards. Its stderr goes to ``log`` (appended; a new temporary file without one),
    its stdout to ``stdout`` or nowhere. A server that does not come up fails with its log's tail."""
    port = free_port()
    if log is None:
        log = Path(tempfile.mkdtemp(prefix="memlane-serve-")) / f"{transport}.stderr"
    with open(log, "ab") as err, open(stdout or os.devnull, "wb") as out:
        proc = subprocess.Popen(
            [MEMLANE, "serve", "--transport", transport, "--port", str(port)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    try:
        try:
            wait_for_port(port, proc)
        except Exception:
            raise RuntimeError(f"{transport} server did not come up:\n{log.read_text()[-3000:]}") from None
        yield Served(transport, port, proc, log)
    finally:
        stop(proc)
