"""Shared fixtures: one embedded PostgreSQL for the session, a fresh database per test, one loaded
embedding model, engines, in-process MCP clients and ``memlane serve`` processes. The helpers they
use, and that tests import, are in tests/support/."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from support.clients import in_process
from support.db import drop_database, migrated_template, new_database
from support.postmaster import release_embedded
from support.processes import serve

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.providers.embedding import make_embedder
from memlane.pipeline.store.embedded import start_embedded
from memlane.pipeline.store.standalone import StandalonePostgres
from memlane.server.settings import Settings, load

# Every temporary directory of the session (the embedded servers' data directories among them, about
# 2 GB each) lives under one directory, removed when the session ends, with any server still running
# in it: memlane's exit handler (pipeline/store/embedded.py), registered when it was imported above,
# runs after this one, too late to stop a server whose directory is gone.
SESSION_TMP = Path(tempfile.mkdtemp(prefix="memlane-tests-"))
SESSION_TMP.chmod(0o755)  # the embedded server runs as another user when the tests run as root
tempfile.tempdir = str(SESSION_TMP)
os.environ["TMPDIR"] = str(SESSION_TMP)


def _remove_tree(root: Path) -> None:
    """Stop the servers under ``root`` (the session's, or one a killed test process left), then
    remove it."""
    for pid_file in root.glob("**/postmaster.pid"):
        try:
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGQUIT)
        except (OSError, ValueError, IndexError):
            pass
    shutil.rmtree(root, ignore_errors=True)


atexit.register(_remove_tree, SESSION_TMP)


# Fixtures that start servers of their own (a standalone PostgreSQL, an embedded one in its own data
# directory, `memlane serve`): a test that takes one is slow, and `make test-fast` leaves it out.
SERVER_FIXTURES = {"external_pg", "external_url", "own_data_dir", "http_server"}


def pytest_collection_modifyitems(config, items):
    """Tests that take a fixture of SERVER_FIXTURES are marked ``slow`` (they are marked in their
    modules too; this keeps a new one out of `make test-fast` when its mark is forgotten).

    Tests marked ``torch`` need the memlane[torch] extra: without it each is skipped and says
    where it runs (`make test-torch`), never silently."""
    import importlib.util

    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())) and "slow" not in item.keywords:
            item.add_marker(pytest.mark.slow)
    if importlib.util.find_spec("sentence_transformers") is not None:
        return
    skip = pytest.mark.skip(reason="needs the memlane[torch] extra: `make test-torch` runs it")
    for item in items:
        if "torch" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def anyio_backend():
    return "asyncio"


# The session's server keeps its data in memory when /dev/shm has room for it (its WAL and the
# databases of the tests running at the time, well under this): a test's CREATE DATABASE and
# migrations then wait on no disk, which took about half of `make test-fast`'s time.
SHM, SHM_NEEDED = Path("/dev/shm"), 4 << 30


def _data_parent() -> Path:
    try:
        if shutil.disk_usage(SHM).free >= SHM_NEEDED and os.access(SHM, os.W_OK):
            d = Path(tempfile.mkdtemp(prefix="memlane-test-pg-", dir=SHM))
            d.chmod(0o755)
            atexit.register(_remove_tree, d)
            return d
    except OSError:
        pass
    return SESSION_TMP


@pytest.fixture(scope="session")
def pg_root() -> str:
    """DSN of the session's embedded server (its maintenance database). Not under pytest's tmp dir:
    that is private to root, and the server runs as another user when the tests run as root."""
    return start_embedded(Path(tempfile.mkdtemp(prefix="memlane-test-pg-", dir=_data_parent())))


@pytest.fixture(scope="session")
def store_template(pg_root) -> str:
    """A database at the latest schema that each test's database is a copy of: copying it is
    quicker than running every migration again per test."""
    return migrated_template(pg_root)


@pytest.fixture
def own_data_dir() -> Iterator[Path]:
    """A data directory for a test that starts (and stops, kills) an embedded server of its own. Not
    under pytest's tmp_path, which is private to root while the server runs as another user; a
    server the test left running there is stopped afterwards."""
    d = Path(tempfile.mkdtemp(prefix="memlane-test-own-"))
    yield d
    release_embedded(d)


@pytest.fixture
def database_url(request, pg_root, store_template) -> Iterator[str]:
    """A new database on the session server: each test sees only its own memories. It is at the
    latest schema already, as memlane leaves a store it created; a test marked ``empty_database``
    (one that builds an older schema, or watches a store being created) gets an empty one.
    Dropped after the test."""
    empty = request.node.get_closest_marker("empty_database") is not None
    dsn = new_database(pg_root, template=None if empty else store_template)
    yield dsn
    drop_database(pg_root, dsn)


@pytest.fixture(scope="session")
def external_pg() -> Iterator[StandalonePostgres]:
    """A standalone PostgreSQL 18 + pgvector server for the session, started with initdb and pg_ctl
    from the embedded package's binaries on its own port, as an external server memlane did not
    start (memlane reaches it only by ``database.url``). Stopped when the session ends."""
    server = StandalonePostgres(Path(tempfile.mkdtemp(prefix="memlane-test-external-"))).init().start()
    yield server
    server.stop()


@pytest.fixture
def external_url(external_pg) -> str:
    """A fresh database on the external server, owned by a new login role that is not a superuser,
    with the vector extension created beforehand (as a managed service's admin would): its URL."""
    name = "app_" + uuid.uuid4().hex[:10]
    return external_pg.create_app_database(name, name)


@pytest.fixture(scope="session")
def embedder():
    emb = make_embedder(EngineConfig().embedding)
    emb.load()
    return emb


@pytest.fixture(scope="session")
def torch_minilm():
    """MiniLM on torch (the memlane[torch] extra), for the tests marked ``torch``."""
    pytest.importorskip("sentence_transformers", reason="needs memlane[torch]: `make test-torch` runs it")
    from memlane.pipeline.config import EmbeddingConfig

    emb = make_embedder(EmbeddingConfig(provider="local"))
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


@pytest.fixture
def connect(database_url, tmp_path, embedder):
    """``async with connect(**settings) as client``: an in-process MCP client on this test's database,
    with settings read as the CLI reads them (through load()), sections given replacing the defaults."""

    @asynccontextmanager
    async def _connect(**overrides: Any):
        settings = load(None, data_dir=tmp_path, database=DatabaseConfig(url=database_url), **overrides)
        async with in_process(settings, embedder=embedder) as client:
            yield client

    return _connect


@pytest.fixture
def http_server():
    """``http_server(env)``: ``memlane serve --transport http`` with that environment on a free port,
    listening; returns its ``Served`` (``.url``, ``.port``, ``.proc``). Stopped after the test."""
    with ExitStack() as stack:

        def _start(env: dict[str, str], **kw: Any):
            return stack.enter_context(serve(env, **kw))

        yield _start
