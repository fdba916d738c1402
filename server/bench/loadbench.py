"""``memlane bench load``: N concurrent MCP clients over streamable HTTP against one ``memlane serve``
process, or against two processes on one database (``--servers 2``), doing a mix of remember and
recall for a bounded time; then a check that every acknowledged remember is stored exactly once.

Loopback only. Each remember carries a unique marker (in its content, so no two are duplicates of
each other, and in ``metadata.load_marker``); afterwards the bench reads the store directly and
counts, per acknowledged marker, the rows that carry it: 0 is a lost write, 2+ a duplicated one.
A row without its vector or content hash (half-written) is counted too.

Before the concurrent phase one client runs the same mix alone, so the report can compare recall's
p95 under load with its single-client p95 measured in the same run on the same store. Nothing here
is asserted: the targets (zero errors, nothing lost or duplicated, recall p95 under 16 clients
within 5x the single-client p95) are reported against.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memlane.pipeline.store.embedded import start_embedded
from memlane.server.bench.common import stop_embedded, uses_configured_store, versions
from memlane.server.bench.corpus import Corpus
from memlane.server.bench.mcpbench import server_command, server_env

# How long a server may take to answer its first recall (database joined, model loaded); generous
# for a loaded laptop. Never reached when things work.
READY_TIMEOUT = 180.0
P95_FACTOR_TARGET = 5.0
WARM_CALLS = 3  # per tool and server, before anything is measured


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values: list[float]) -> dict[str, float]:
    """p50/p95/p99 (numpy's linear interpolation), ms, 2 decimals; zeros when nothing was measured."""
    import numpy as np

    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "n": 0}
    p50, p95, p99 = np.percentile(np.asarray(values, dtype=float), [50, 95, 99])
    return {
        "p50": round(float(p50), 2),
        "p95": round(float(p95), 2),
        "p99": round(float(p99), 2),
        "n": len(values),
    }


class Servers:
    """``count`` ``memlane serve --transport http`` processes on one store, on loopback ports."""

    def __init__(self, count: int, env: dict[str, str], log_dir: Path) -> None:
        self.count = count
        self.env = env
        self.log_dir = log_dir
        self.procs: list[subprocess.Popen] = []
        self.ports: list[int] = []

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{p}/mcp" for p in self.ports]

    def start(self) -> None:
        command, args = server_command()
        for i in range(self.count):
            port = _free_port()
            err = open(self.log_dir / f"server-{i}.stderr", "wb")  # noqa: SIM115 - closed with the process
            proc = subprocess.Popen(
                [command, *args, "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            err.close()
            self.procs.append(proc)
            self.ports.append(port)

    async def wait_ready(self, project: str) -> None:
        """Each server answers a recall (its database is open and its model loaded)."""
        from mcp import Client

        for url, proc in zip(self.urls, self.procs, strict=True):
            deadline = time.monotonic() + READY_TIMEOUT
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"a memlane server exited with {proc.returncode} (logs in {self.log_dir})"
                    )
                try:
                    async with Client(url) as client:
                        r = await client.call_tool(
                            "recall", {"query": "warm-up: is anything stored?", "project": project}
                        )
                        if not r.is_error:
                            await self._warm(client, project)
                            break
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{url} not ready after {READY_TIMEOUT:.0f} s (logs in {self.log_dir})"
                    )
                await asyncio.sleep(0.3)

    @staticmethod
    async def _warm(client, project: str) -> None:
        """A few unmeasured calls: the first embeddings and searches of a process are slower."""
        corpus = Corpus(seed=99)
        for i, item in enumerate(corpus.take(WARM_CALLS)):
            await client.call_tool(
                "remember", {"content": f"warm-up {i}: {item.content}", "project": project}
            )
        for q in corpus.questions(WARM_CALLS):
            await client.call_tool("recall", {"query": q.text, "project": project})

    def stop(self) -> None:
        # SIGINT (Ctrl-C): a clean exit; the last process out stops an embedded server it started.
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Tally:
    """What the clients saw: latencies per tool, errors, and the markers of acknowledged remembers."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {"remember": [], "recall": []}
        self.errors = 0
        self.error_samples: list[str] = []
        self.acknowledged: list[str] = []

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text[:300])


async def client_loop(
    url: str, tag: str, project: str, until: float, write_share: float, seed: int, tally: Tally
) -> None:
    """One MCP session: remember (with a unique marker) or recall, as fast as answers come, until ``until``."""
    from mcp import Client

    rng = random.Random(seed)
    corpus = Corpus(seed=seed)
    seq = 0
    async with Client(url) as client:
        while time.monotonic() < until:
            if rng.random() < write_share:
                seq += 1
                marker = f"{tag}-{seq}"
                [item] = corpus.take(1)
                args = {
                    "content": f"{item.content} (load marker {marker})",
                    "project": project,
                    "metadata": {"load_marker": marker},
                }
                tool = "remember"
            else:
                [q] = corpus.questions(1)
                args = {"query": q.text, "project": project}
                tool = "recall"
            t0 = time.perf_counter()
            try:
                r = await client.call_tool(tool, args)
            except Exception as e:  # noqa: BLE001 - a transport failure is an error to count
                tally.error(f"{tool}: {type(e).__name__}: {e}")
                continue
            ms = (time.perf_counter() - t0) * 1000
            if r.is_error:
                tally.error(f"{tool}: {' '.join(getattr(c, 'text', '') for c in r.content)}")
                continue
            tally.ms[tool].append(ms)
            if tool == "remember":
                tally.acknowledged.append(marker)


async def phase(
    urls: list[str], clients: int, seconds: float, project: str, write_share: float, run_id: str, name: str
) -> tuple[Tally, float]:
    tally = Tally()
    t0 = time.monotonic()
    until = t0 + seconds
    await asyncio.gather(
        *(
            client_loop(
                urls[i % len(urls)], f"{run_id}-{name}{i}", project, until, write_share, 1000 + i, tally
            )
            for i in range(clients)
        )
    )
    return tally, time.monotonic() - t0


def verify(dsn: str, project: str, acknowledged: list[str]) -> dict[str, Any]:
    """Count, per acknowledged marker, the stored rows carrying it; and rows left half-written."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT metadata->>'load_marker', count(*) FROM memories WHERE project = %s"
            " AND metadata ? 'load_marker' GROUP BY 1",
            (project,),
        ).fetchall()
        (half,) = conn.execute(
            "SELECT count(*) FROM memories WHERE project = %s AND (embedding IS NULL OR content_hash IS NULL)",
            (project,),
        ).fetchone()
    stored = dict(rows)
    lost = sum(1 for m in acknowledged if stored.get(m, 0) == 0)
    duplicated = sum(1 for m in acknowledged if stored.get(m, 0) > 1)
    return {"lost": lost, "duplicated": duplicated, "half_written": half, "stored_rows": sum(stored.values())}


async def run(
    settings,
    *,
    clients: int = 16,
    seconds: float = 30.0,
    servers: int = 1,
    write_share: float = 0.5,
    single_seconds: float | None = None,
    config_path: str | None = None,
) -> dict[str, Any]:
    cfg = settings.engine()
    temp = None if uses_configured_store(cfg) else Path(tempfile.mkdtemp(prefix="memlane-bench-load-"))
    data_dir = temp or cfg.data_dir
    run_id = uuid.uuid4().hex[:8]
    project = f"bench-load-{run_id}"
    log_dir = Path(tempfile.mkdtemp(prefix="memlane-bench-load-logs-"))
    single_seconds = single_seconds if single_seconds is not None else max(2.0, min(10.0, seconds / 3))
    env = server_env(cfg, data_dir, config_path)
    fleet = Servers(
        servers, {**{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}, **env}, log_dir
    )
    ok = False
    try:
        if cfg.database.url is not None:
            dsn = cfg.database.url.get_secret_value()
        else:  # the bench joins (or starts) the embedded server first, so no server races to initialise it
            dsn = await asyncio.to_thread(start_embedded, data_dir)
        fleet.start()
        print(f"starting {servers} server(s)", file=sys.stderr)
        await fleet.wait_ready(project)
        print(f"single client for {single_seconds:.0f} s", file=sys.stderr)
        single, _ = await phase(fleet.urls[:1], 1, single_seconds, project, write_share, run_id, "single")
        print(f"{clients} clients for {seconds:.0f} s", file=sys.stderr)
        loaded, took = await phase(fleet.urls, clients, seconds, project, write_share, run_id, "c")
        check = await asyncio.to_thread(verify, dsn, project, single.acknowledged + loaded.acknowledged)
        if temp is None:
            await asyncio.to_thread(_delete_project, dsn, project)
        ok = True
    finally:
        fleet.stop()
        if temp is not None:
            stop_embedded(temp)
            shutil.rmtree(temp, ignore_errors=True)
        if ok:
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            print(f"memlane bench load: the servers' stderr is in {log_dir}", file=sys.stderr)
    calls = len(loaded.ms["remember"]) + len(loaded.ms["recall"])
    single_p95 = pct(single.ms["recall"])["p95"]
    recall = pct(loaded.ms["recall"])
    return {
        "benchmark": "load",
        "clients": clients,
        "seconds": seconds,
        "servers": servers,
        "errors": loaded.errors + single.errors,
        "error_samples": (single.error_samples + loaded.error_samples)[:5],
        "acknowledged": len(single.acknowledged) + len(loaded.acknowledged),
        "lost": check["lost"],
        "duplicated": check["duplicated"],
        "half_written": check["half_written"],
        "throughput_per_s": round(calls / took, 2) if took > 0 else 0.0,
        "latency_ms": {"remember": pct(loaded.ms["remember"]), "recall": recall},
        "single_client_recall_p95_ms": single_p95,
        "single_client_latency_ms": {
            "remember": pct(single.ms["remember"]),
            "recall": pct(single.ms["recall"]),
        },
        "recall_p95_ratio": round(recall["p95"] / single_p95, 2) if single_p95 else None,
        "cores": os.cpu_count(),
        "targets": {
            "errors": 0,
            "lost": 0,
            "duplicated": 0,
            "recall_p95_within_x_single_client": P95_FACTOR_TARGET,
        },
        "config": {
            "transport": "streamable HTTP on 127.0.0.1, one mcp.Client session per client",
            "write_share": write_share,
            "single_client_seconds": single_seconds,
            "project": "one fresh project, shared by every client",
            "database": "temporary embedded PostgreSQL, started by the bench; the servers join it"
            if temp is not None
            else "configured store (the run's project is deleted afterwards)",
            "embedding_model": f"{cfg.embedding.provider}:{cfg.embedding.model}",
            "mode": "offline" if cfg.llm.provider == "none" else "llm",
        },
        "versions": await versions(),
    }


def _delete_project(dsn: str, project: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE project = %s", (project,))


def markdown(r: dict[str, Any]) -> str:
    lat = r["latency_ms"]
    lines = [
        f"### memlane bench load: {r['clients']} clients, {r['servers']} server process(es), "
        f"{r['seconds']:g} s, {r['cores']} cores",
        "",
        "| tool | calls | p50 ms | p95 ms | p99 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for tool in ("remember", "recall"):
        x = lat[tool]
        lines.append(f"| {tool} | {x['n']} | {x['p50']} | {x['p95']} | {x['p99']} |")
    ratio = r["recall_p95_ratio"]
    lines += [
        "",
        f"throughput {r['throughput_per_s']} calls/s; errors {r['errors']}; acknowledged remembers "
        f"{r['acknowledged']}: lost {r['lost']}, duplicated {r['duplicated']}, half-written {r['half_written']}",
        f"recall p95 single client {r['single_client_recall_p95_ms']} ms; under load {lat['recall']['p95']} ms "
        f"({ratio}x; target within {P95_FACTOR_TARGET:g}x)",
        "",
    ]
    return "\n".join(lines)
