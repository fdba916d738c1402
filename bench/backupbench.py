"""``memlane bench backup``: ``memlane backup`` and ``memlane restore`` of a store of N memories.

The store is built quickly, not by embedding N texts: rows with seeded random unit vectors of the
embedding model's dimension are copied into a store the engine created (so its schema, triggers and
keyword statistics are the real ones), spread over ``--projects`` projects, and each project then
gets its HNSW and full-text index as the store makes them (``vectors.create_index``). Each run backs
the whole store up (pipeline/store/backup.py) and restores it into a new database on the same
server, verified against the manifest; the report gives every run and the medians.

Always a temporary embedded server, whatever the settings name: a backup is of a whole database,
and the benchmark never copies a user's store.
"""

from __future__ import annotations

import hashlib
import statistics
import time
import uuid
from typing import Any

from memlane.bench.common import admin_connection, bench_engine, config_snapshot, progress, versions
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.store import backup as backups
from memlane.pipeline.store import vectors


def _rows(n: int, projects: int, dim: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    for start in range(0, n, 10_000):
        block = rng.standard_normal((min(10_000, n - start), dim)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        for j, v in enumerate(block):
            i = start + j
            content = f"memory {i}: a note on topic {i % 97}, item {i % 1013}, area {i % 31}"
            yield f"p{i % projects}", content, hashlib.sha256(content.encode()).hexdigest(), v


async def build(engine, n: int, projects: int, seed: int, show: bool) -> dict[str, Any]:
    dim = engine.embedder.dim
    started = time.perf_counter()
    async with admin_connection(engine.store) as conn:
        async with conn.cursor() as cur:
            copy_sql = (
                "COPY memories (project, content, content_hash, embedding) FROM STDIN WITH (FORMAT BINARY)"
            )
            async with cur.copy(copy_sql) as copy:
                copy.set_types(["text", "text", "text", "vector"])
                with progress(n, "build", show, unit="mem") as bar:
                    for k, row in enumerate(_rows(n, projects, dim, seed)):
                        await copy.write_row(row)
                        if k % 1000 == 999:
                            bar.update(1000)
    copied = time.perf_counter() - started
    async with admin_connection(engine.store) as conn:
        for p in range(projects):
            await vectors.create_index(conn, f"p{p}")
    size = await engine.store.database_size()
    return {
        "memories": n,
        "projects": projects,
        "dim": dim,
        "copy_s": round(copied, 1),
        "index_s": round(time.perf_counter() - started - copied, 1),
        "database_mb": round(size / 1e6, 1),
    }


async def run(memories: int, *, runs: int = 3, projects: int = 10, seed: int = 7, show_progress: bool = True):
    config = EngineConfig()  # never the configured store: see the module's docstring
    async with bench_engine(config) as ctx:
        engine = ctx.engine
        assert ctx.temp_dir is not None  # EngineConfig() names no store: the bench makes a temporary one
        store = await build(engine, memories, projects, seed, show_progress)
        dsn = engine.store.dsn
        compression = engine.config.backup.compression
        measured = []
        for k in range(runs):
            t0 = time.perf_counter()
            path, manifest = await backups.backup(dsn, ctx.temp_dir / f"run{k}.dump", compression=compression)
            backup_s = time.perf_counter() - t0
            name = "restore_" + uuid.uuid4().hex[:8]
            async with admin_connection(engine.store) as conn:
                await conn.execute(f'CREATE DATABASE "{name}"')
            base, _, query = dsn.partition("?")
            target = base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
            t1 = time.perf_counter()
            await backups.restore(target, path)
            measured.append(
                {
                    "backup_s": round(backup_s, 2),
                    "restore_s": round(time.perf_counter() - t1, 2),
                    "archive_mb": round(path.stat().st_size / 1e6, 1),
                }
            )
            path.unlink()
            backups.manifest_path(path).unlink()
            async with admin_connection(engine.store) as conn:
                await conn.execute(f'DROP DATABASE "{name}"')
        cfg = config_snapshot(ctx, memories=memories, runs=runs, projects=projects, seed=seed)
        vers = await versions(engine)
    return {
        "benchmark": "backup",
        "store": store,
        "compression": compression,
        "tables": manifest.tables,
        "runs": measured,
        "median": {
            key: round(statistics.median(r[key] for r in measured), 2)
            for key in ("backup_s", "restore_s", "archive_mb")
        },
        "config": cfg,
        "versions": vers,
    }


def markdown(r: dict[str, Any]) -> str:
    s, m = r["store"], r["median"]
    runs = r["runs"]
    lines = [
        f"## memlane backup and restore of {s['memories']} memories",
        "",
        f"Store: {s['memories']} memories ({s['dim']}-dimension unit vectors) in {s['projects']} projects, "
        f"each with its HNSW and full-text index; {s['database_mb']} MB of database, built by COPY in "
        f"{s['copy_s']} s and indexed in {s['index_s']} s. pg_dump gzip level {r['compression']}.",
        "",
        f"| | median of {len(runs)} runs | runs |",
        "|---|---|---|",
        f"| backup (archive {m['archive_mb']} MB) | {m['backup_s']} s | "
        + ", ".join(f"{x['backup_s']}" for x in runs)
        + " s |",
        f"| restore (indexes rebuilt, counts checked) | {m['restore_s']} s | "
        + ", ".join(f"{x['restore_s']}" for x in runs)
        + " s |",
        "",
    ]
    return "\n".join(lines)
