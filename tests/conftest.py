"""Shared fixtures: one embedded PostgreSQL for the session, a fresh database per test, one loaded
embedding model, and helpers to run ``memlane`` as a real subprocess."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.providers.embedding import make_embedder
from memlane.pipeline.records import Memory
from memlane.pipeline.store.embedded import start_embedded
from memlane.server.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
MEMLANE = str(Path(sys.executable).with_name("memlane"))

# Every temporary directory of the session (the embedded servers' data directories among them, about
# 2 GB each) lives under one directory, removed when the session ends: after pgserver's exit handler
# has stopped the session's server (registered later, so it runs first).
SESSION_TMP = Path(tempfile.mkdtemp(prefix="memlane-tests-"))
SESSION_TMP.chmod(0o755)  # the embedded server runs as another user when the tests run as root
tempfile.tempdir = str(SESSION_TMP)
os.environ["TMPDIR"] = str(SESSION_TMP)


def _remove_session_tmp() -> None:
    for pid_file in SESSION_TMP.glob("**/postmaster.pid"):  # a server a killed test process left
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        except (OSError, ValueError, IndexError):
            pass
    shutil.rmtree(SESSION_TMP, ignore_errors=True)


atexit.register(_remove_session_tmp)


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def pg_root() -> str:
    """DSN of the session's embedded server (its maintenance database). Not under pytest's tmp dir:
    that is private to root, and the server runs as another user when the tests run as root."""
    return start_embedded(Path(tempfile.mkdtemp(prefix="memlane-test-pg-")))


def _with_db(dsn: str, name: str) -> str:
    base, _, query = dsn.partition("?")
    base = base.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


@pytest.fixture
def database_url(pg_root) -> str:
    """A new, empty database on the session server: each test sees only its own memories."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg_root, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return _with_db(pg_root, name)


@pytest.fixture(scope="session")
def embedder():
    emb = make_embedder(EngineConfig().embedding)
    emb.load()
    return emb


@pytest.fixture
def engine_config(database_url, tmp_path) -> EngineConfig:
    return EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url))


@pytest.fixture
async def engine(engine_config, embedder):
    eng = Engine(engine_config, embedder=embedder)
    await eng.open()
    yield eng
    await eng.close()


@pytest.fixture
async def open_engine(embedder):
    """Opens engines on configs of the test's own (and an optional LLM); all closed after it."""
    opened: list[Engine] = []

    async def _open(cfg: EngineConfig, llm=None) -> Engine:
        eng = Engine(cfg, embedder=embedder, llm=llm)
        await eng.open()
        opened.append(eng)
        return eng

    yield _open
    for eng in opened:
        await eng.close()


@pytest.fixture
def settings(database_url, tmp_path) -> Settings:
    return Settings(data_dir=tmp_path, database=DatabaseConfig(url=database_url))


def make_memory(content: str, **fields) -> Memory:
    """A Memory record for the pure stages' tests (no database): defaults for every other field."""
    now = fields.pop("created_at", None) or datetime.now(UTC)
    base = {
        "id": uuid.uuid4(),
        "project": "p",
        "content": content,
        "category": None,
        "tags": (),
        "metadata": {},
        "pinned": False,
        "priority": 3,
        "occurred_at": None,
        "created_at": now,
        "updated_at": now,
        "expires_at": None,
        "source": None,
    }
    base.update(fields)
    return Memory(**base)


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
