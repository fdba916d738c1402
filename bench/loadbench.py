"""``memlane bench load``: N concurrent MCP clients over streamable HTTP against one ``memlane serve``
process, or against several processes on one database (``--servers N``), doing a mix of remember and
recall for a bounded time; then a check that every acknowledged remember is stored exactly once, and
that every server answers a fixed set of questions exactly as one fresh server alone does.

The database: a temporary embedded one the bench starts (the servers join it), the configured one,
``--database-url URL`` (an external PostgreSQL, as production runs it: the servers get it as
``database.url``), or ``--database-url standalone``: a standalone PostgreSQL 18 + pgvector server
the bench starts from the embedded package's binaries (pipeline/store/standalone.py) with a database
owned by a role that is no superuser, stopped and removed afterwards.

The clients speak the 2026-07-28 protocol, whose requests are self-contained, through a round-robin
transport: each HTTP request goes to the next server, as a load balancer without session affinity
sends them. With one server that is every request to it.

Loopback only. Each remember carries a unique marker (in its content, so no two are duplicates of
each other, and in ``metadata.load_marker``); afterwards the bench reads the store directly and
counts, per acknowledged marker, the rows that carry it: 0 is a lost write, 2+ a duplicated one.
A row without its vector or content hash (half-written) is counted too.

After the load, each server and then a fresh server started on the same store answer the same
questions (read-only): the returned ids, in order, must be equal. Once at once, and once after the
one per-process state that may still differ has expired (a project that got its vector index
during the load is searched exactly by a server that has not seen the index yet, for up to
``INDEX_RECHECK_S``); cached category centroids are checked against the database on every use.

Before the concurrent phase one client runs the same mix alone, so the report can compare recall's
p95 under load with its single-client p95 measured in the same run on the same store. Nothing here
is asserted: the targets (zero errors, nothing lost or duplicated, recall p95 under 16 clients
within 5x the single-client p95) are reported against.
"""

from __future__ import annotations

import asyncio
import itertools
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
from collections import Counter
from pathlib import Path
from typing import Any

from memlane.bench.common import stop_embedded, uses_configured_store, versions
from memlane.bench.corpus import Corpus
from memlane.bench.mcpbench import server_command, server_env
from memlane.pipeline.store.embedded import start_embedded
from memlane.pipeline.store.vectors import INDEX_RECHECK_S, PROJECT_INDEX_MIN

# How long a server may take to answer its first recall (database joined, model loaded); generous
# for a loaded laptop. Never reached when things work.
READY_TIMEOUT = 180.0
P95_FACTOR_TARGET = 5.0
WARM_CALLS = 3  # per tool and server, before anything is measured
# The protocol whose requests carry everything a server needs: no session to pin to one server.
MODERN = "2026-07-28"
CHECK_QUESTIONS = 12  # asked of every server after the load
STANDALONE = "standalone"  # --database-url value: the bench starts its own PostgreSQL server


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

    def __init__(self, count: int, env: dict[str, str], log_dir: Path, *, name: str = "server") -> None:
        self.count = count
        self.name = name
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
            err = open(self.log_dir / f"{self.name}-{i}.stderr", "wb")  # noqa: SIM115 - closed with the process
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

    async def wait_ready(self, project: str, *, warm_writes: bool = True) -> None:
        """Each server answers a recall (its database is open and its model loaded). Without
        ``warm_writes`` its warm-up only reads (a reference server must not change the store)."""
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
                            await self._warm(client, project, writes=warm_writes)
                            break
                except Exception:  # noqa: BLE001 - not listening yet
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{url} not ready after {READY_TIMEOUT:.0f} s (logs in {self.log_dir})"
                    )
                await asyncio.sleep(0.3)

    @staticmethod
    async def _warm(client, project: str, *, writes: bool = True) -> None:
        """A few unmeasured calls: the first embeddings and searches of a process are slower."""
        corpus = Corpus(seed=99)
        for i, item in enumerate(corpus.take(WARM_CALLS) if writes else []):
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
        self.sent: Counter = Counter()  # HTTP requests per server URL

    def error(self, text: str) -> None:
        self.errors += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(text[:300])


def round_robin_client(urls: list[str], start: int = 0, sent: Counter | None = None):
    """An MCP client whose every HTTP request goes to the next of ``urls`` (from ``start``), as a
    load balancer without session affinity sends them; with one URL, a plain client. ``sent``
    counts the requests per URL. Returns the client and the httpx client to close after it."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

    class RoundRobin(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            order = [*urls[start % len(urls) :], *urls[: start % len(urls)]]
            self._next = itertools.cycle([httpx2.URL(u) for u in order])
            self._inner = httpx2.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            target = next(self._next)
            if sent is not None:
                sent[str(target)] += 1
            request.url = request.url.copy_with(host=target.host, port=target.port)
            return await self._inner.handle_async_request(request)

        async def aclose(self) -> None:
            await self._inner.aclose()

    http = httpx2.AsyncClient(
        transport=RoundRobin(), timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
    )
    return Client(streamable_http_client(urls[0], http_client=http), mode=MODERN), http


async def client_loop(
    urls: list[str],
    start: int,
    tag: str,
    project: str,
    until: float,
    write_share: float,
    seed: int,
    tally: Tally,
) -> None:
    """One MCP client: remember (with a unique marker) or recall, as fast as answers come, until ``until``."""
    rng = random.Random(seed)
    corpus = Corpus(seed=seed)
    seq = 0
    client, http = round_robin_client(urls, start, tally.sent)
    async with http, client:
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
            client_loop(urls, i, f"{run_id}-{name}{i}", project, until, write_share, 1000 + i, tally)
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
        counted = conn.execute(
            "SELECT count(*) FROM memories WHERE project = %s AND (embedding IS NULL OR content_hash IS NULL)",
            (project,),
        ).fetchone()
    assert counted is not None  # count(*) returns its one row
    (half,) = counted
    stored: dict[str, int] = dict(rows)
    lost = sum(1 for m in acknowledged if stored.get(m, 0) == 0)
    duplicated = sum(1 for m in acknowledged if stored.get(m, 0) > 1)
    return {"lost": lost, "duplicated": duplicated, "half_written": half, "stored_rows": sum(stored.values())}


async def answers(url: str, project: str, questions: list[str]) -> list[list[str]]:
    """The memory ids (handles) one server returns for each question, in order."""
    client, http = round_robin_client([url])
    out: list[list[str]] = []
    async with http, client:
        for q in questions:
            r = await client.call_tool("recall", {"query": q, "project": project})
            if r.is_error:
                out.append([f"error: {' '.join(getattr(c, 'text', '') for c in r.content)[:200]}"])
            else:
                out.append([m["id"] for m in r.structured_content["memories"]])
    return out


def mismatches(reference: list[list[str]], per_server: list[list[list[str]]]) -> int:
    """(server, question) pairs whose ids or order differ from the reference's."""
    return sum(got != want for server in per_server for got, want in zip(server, reference, strict=True))


async def recall_check(
    fleet: Servers, env: dict[str, str], log_dir: Path, project: str, cfg, stored_rows: int, load_end: float
) -> dict[str, Any]:
    """Every server's answers to the same questions against a fresh server's on the same store:
    right after the load, and again once a project's vector-index state has expired, when the
    project is big enough to have got its index during the load."""
    questions = [q.text for q in Corpus(seed=4242).questions(CHECK_QUESTIONS)]
    at_once = [await answers(u, project, questions) for u in fleet.urls]
    settle = 0.0
    if stored_rows >= PROJECT_INDEX_MIN - 50:  # (the warm-ups count too)
        settle = INDEX_RECHECK_S + 1.0
    reference = Servers(1, env, log_dir, name="reference")
    reference.start()
    try:
        await reference.wait_ready(project, warm_writes=False)
        await asyncio.sleep(max(0.0, settle - (time.monotonic() - load_end)))
        alone = await answers(reference.urls[0], project, questions)
        settled = [await answers(u, project, questions) for u in fleet.urls]
    finally:
        reference.stop()
    return {
        "questions": len(questions),
        "servers": len(fleet.urls),
        "mismatches": mismatches(alone, settled),
        "mismatches_right_after_load": mismatches(alone, at_once),
        "settle_s": round(settle, 1),
        "empty_answers": sum(not ids for ids in alone),
    }


async def run(
    settings,
    *,
    clients: int = 16,
    seconds: float = 30.0,
    servers: int = 1,
    write_share: float = 0.5,
    single_seconds: float | None = None,
    config_path: str | None = None,
    database_url: str | None = None,
) -> dict[str, Any]:
    """``database_url``: the servers' ``database.url`` (an external PostgreSQL), or ``STANDALONE``
    for one the bench starts and removes; None: the configured store, else a temporary embedded one."""
    cfg = settings.engine()
    standalone = None
    if database_url == STANDALONE:
        from memlane.pipeline.store.standalone import StandalonePostgres

        print("starting a standalone PostgreSQL server", file=sys.stderr)
        standalone = StandalonePostgres(Path(tempfile.mkdtemp(prefix="memlane-bench-pg-")))
        await asyncio.to_thread(lambda: standalone.init().start())
        database_url = await asyncio.to_thread(standalone.create_app_database)
    embedded = database_url is None and not uses_configured_store(cfg)
    # With an external database the servers still need a data directory (tokens, backups): a
    # temporary one, as each machine of a fleet has its own.
    temp = Path(tempfile.mkdtemp(prefix="memlane-bench-load-")) if embedded or database_url else None
    data_dir = temp or cfg.data_dir
    run_id = uuid.uuid4().hex[:8]
    project = f"bench-load-{run_id}"
    log_dir = Path(tempfile.mkdtemp(prefix="memlane-bench-load-logs-"))
    single_seconds = single_seconds if single_seconds is not None else max(2.0, min(10.0, seconds / 3))
    env = server_env(cfg, data_dir, config_path)
    if database_url is not None:
        env["MEMLANE_DATABASE__URL"] = database_url
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}, **env}
    fleet = Servers(servers, env, log_dir)
    ok = False
    try:
        if database_url is not None:
            dsn = database_url
        elif cfg.database.url is not None:
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
        load_end = time.monotonic()
        check = await asyncio.to_thread(verify, dsn, project, single.acknowledged + loaded.acknowledged)
        print("the same questions to every server and to a fresh one", file=sys.stderr)
        same = await recall_check(fleet, env, log_dir, project, cfg, check["stored_rows"], load_end)
        if not embedded and standalone is None:
            await asyncio.to_thread(_delete_project, dsn, project)
        ok = True
    finally:
        fleet.stop()
        if embedded and temp is not None:  # (an embedded run always has its temporary directory)
            stop_embedded(temp)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)
        if standalone is not None:
            standalone.stop()
            shutil.rmtree(standalone.root, ignore_errors=True)
        if ok:
            shutil.rmtree(log_dir, ignore_errors=True)
        else:
            print(f"memlane bench load: the servers' stderr is in {log_dir}", file=sys.stderr)
    calls = len(loaded.ms["remember"]) + len(loaded.ms["recall"])
    single_p95 = pct(single.ms["recall"])["p95"]
    recall = pct(loaded.ms["recall"])
    if standalone is not None:
        database = "standalone PostgreSQL 18 + pgvector started by the bench (initdb, pg_ctl), reached by database.url as a role that is no superuser"
    elif database_url is not None:
        database = "external PostgreSQL given by --database-url (the run's project is deleted afterwards)"
    elif embedded:
        database = "temporary embedded PostgreSQL, started by the bench; the servers join it"
    else:
        database = "configured store (the run's project is deleted afterwards)"
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
        "calls_per_s": {
            t: round(len(loaded.ms[t]) / took, 2) if took > 0 else 0.0 for t in ("remember", "recall")
        },
        "latency_ms": {"remember": pct(loaded.ms["remember"]), "recall": recall},
        "single_client_recall_p95_ms": single_p95,
        "single_client_latency_ms": {
            "remember": pct(single.ms["remember"]),
            "recall": pct(single.ms["recall"]),
        },
        "recall_p95_ratio": round(recall["p95"] / single_p95, 2) if single_p95 else None,
        "recall_check": same,
        "requests_per_server": [loaded.sent[u] for u in fleet.urls],
        "cores": os.cpu_count(),
        "targets": {
            "errors": 0,
            "lost": 0,
            "duplicated": 0,
            "recall_mismatches": 0,
            "recall_p95_within_x_single_client": P95_FACTOR_TARGET,
        },
        "config": {
            "transport": f"streamable HTTP on 127.0.0.1, protocol {MODERN}; each client's requests go "
            "round-robin over the servers (no session affinity)",
            "write_share": write_share,
            "single_client_seconds": single_seconds,
            "project": "one fresh project, shared by every client",
            "database": database,
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
        "| tool | calls | calls/s | p50 ms | p95 ms | p99 ms |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    per_s = r.get("calls_per_s", {})
    for tool in ("remember", "recall"):
        x = lat[tool]
        lines.append(f"| {tool} | {x['n']} | {per_s.get(tool, '')} | {x['p50']} | {x['p95']} | {x['p99']} |")
    ratio = r["recall_p95_ratio"]
    lines += [
        "",
        f"throughput {r['throughput_per_s']} calls/s; errors {r['errors']}; acknowledged remembers "
        f"{r['acknowledged']}: lost {r['lost']}, duplicated {r['duplicated']}, half-written {r['half_written']}",
        f"recall p95 single client {r['single_client_recall_p95_ms']} ms; under load {lat['recall']['p95']} ms "
        f"({ratio}x; target within {P95_FACTOR_TARGET:g}x)",
    ]
    if len(r.get("requests_per_server", [])) > 1:
        lines.append(
            "HTTP requests per server (round-robin): " + " / ".join(map(str, r["requests_per_server"]))
        )
    if same := r.get("recall_check"):
        lines.append(
            f"recall check: {same['questions']} questions to each of {same['servers']} server(s) and to a fresh "
            f"one: {same['mismatches']} answers differ"
            + (
                f" ({same['mismatches_right_after_load']} right after the load, before a new vector index "
                f"was seen by every server in {same['settle_s']:g} s)"
                if same["settle_s"]
                else f", asked right after the load ({same['mismatches_right_after_load']})"
            )
        )
    lines.append("")
    return "\n".join(lines)


def servers_markdown(paths: list[str | Path]) -> str:
    """One table over stored load reports (one per server count): per tool calls/s and latency,
    and per run errors, lost and duplicated writes and the recall check; for the docs."""
    import json

    lines = [
        "| servers | tool | calls/s | p50 ms | p95 ms | p99 ms | errors | lost | duplicated | recall answers differing |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for path in paths:
        r = json.loads(Path(path).read_text(encoding="utf-8"))
        same = r["recall_check"]
        run = [
            str(r["errors"]),
            f"{r['lost']} of {r['acknowledged']}",
            str(r["duplicated"]),
            f"{same['mismatches']} of {same['questions'] * same['servers']} "
            f"({same['mismatches_right_after_load']} right after the load)",
        ]
        for i, tool in enumerate(("remember", "recall")):
            x = r["latency_ms"][tool]
            cells = [str(r["servers"]), tool, f"{r['calls_per_s'][tool]:.2f}"]
            cells += [f"{x[k]:.0f}" for k in ("p50", "p95", "p99")]
            cells += run if i == 0 else ["", "", "", ""]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
