"""Prometheus metrics of one server, in a registry of its own (not the client library's global one,
so that several servers in one process, as in the tests, do not clash).

Recorded as the work happens: tool calls by tool and outcome, their duration; each recall's stage
durations, memories returned, stages degraded or skipped (from its trace) and where it read (with
read replicas); LLM calls, tokens and their duration, and embedding time (``pipeline/telemetry.py``
hooks). Read at scrape time: the connection pools and the memories stored, the latter from
``memlane_projects`` (one row a project, kept by triggers) and cached for ``MEMORIES_TTL_S`` so that
a scrape costs at most one small query that often.

No label holds memory text or a secret: tools, stages, providers and outcomes are names from the
code or the configuration; a stage's reason for being skipped or degraded is cut to its first
words (``telemetry.reason_of``) and at most ``REASONS_PER_STAGE`` of them are kept per stage; projects are
label values only with ``[telemetry] project_labels``, and at most ``project_label_limit`` of them.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memlane.pipeline import telemetry
from memlane.server.version import VERSION

if TYPE_CHECKING:
    from memlane.pipeline.records import Trace
    from memlane.server.settings import TelemetryConfig

log = logging.getLogger("memlane.server")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MEMORIES_TTL_S = 15.0  # a scrape reads the memory counts at most this often
SCRAPE_QUERY_TIMEOUT_S = 2.0
REASONS_PER_STAGE = 12
OUTCOMES = ("ok", "invalid_input", "refused", "error")
# Seconds: a recall is milliseconds to a few seconds with LLM stages; a stage from 0.1 ms up.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STAGE_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
RETURNED_BUCKETS = (0, 1, 2, 3, 5, 10, 20, 50, 100)


class Metrics:
    """The metrics of one server (one ``State``)."""

    def __init__(self, config: TelemetryConfig | None = None, *, tools: list[str] | None = None) -> None:
        disable_created_metrics()  # no *_created series: they double the exposition for nothing
        self.config = config
        self.tools = set(tools or ())  # a name a caller made up is counted as "unknown"
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        Gauge("memlane_build_info", "The memlane version this server runs.", ["version"], registry=r).labels(
            VERSION
        ).set(1)
        self.tool_calls = Counter(
            "memlane_tool_calls", "MCP tool calls, by tool and outcome.", ["tool", "outcome"], registry=r
        )
        self.tool_seconds = Histogram(
            "memlane_tool_call_duration_seconds",
            "How long MCP tool calls took (recall and remember among them), by tool.",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_seconds = Histogram(
            "memlane_recall_stage_duration_seconds",
            "How long each recall stage took.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.returned = Histogram(
            "memlane_recall_memories_returned",
            "Memories one recall returned.",
            buckets=RETURNED_BUCKETS,
            registry=r,
        )
        self.degraded = Counter(
            "memlane_recall_stages_degraded",
            "Recall stages that failed and let their input through, by stage and reason.",
            ["stage", "reason"],
            registry=r,
        )
        self.skipped = Counter(
            "memlane_recall_stages_skipped",
            "Recall stages that did not run, by stage and reason.",
            ["stage", "reason"],
            registry=r,
        )
        self.reads = Counter(
            "memlane_recall_reads",
            "Recalls by where they read, with read replicas configured: replica, primary, or fallback "
            "(a replica failed during the recall and the primary answered).",
            ["target"],
            registry=r,
        )
        self.llm_calls = Counter(
            "memlane_llm_calls",
            "LLM calls by stage, provider and outcome (ok, cached, error, timeout, deferred).",
            ["stage", "provider", "outcome"],
            registry=r,
        )
        self.llm_errors = Counter(
            "memlane_llm_errors",
            "LLM calls that failed or timed out, by stage and provider.",
            ["stage", "provider"],
            registry=r,
        )
        self.llm_tokens = Counter(
            "memlane_llm_tokens",
            "LLM tokens by stage, provider and direction (input, output).",
            ["stage", "provider", "direction"],
            registry=r,
        )
        self.llm_seconds = Histogram(
            "memlane_llm_call_duration_seconds",
            "How long LLM calls that reached the provider took, by stage and provider.",
            ["stage", "provider"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.embed_seconds = Histogram(
            "memlane_embedding_duration_seconds",
            "How long one call of the embedding model took, by kind (passages, queries).",
            ["kind"],
            buckets=STAGE_BUCKETS + (10.0, 30.0),
            registry=r,
        )
        self.embedded_texts = Counter(
            "memlane_embedded_texts", "Texts embedded, by kind (passages, queries).", ["kind"], registry=r
        )
        self._reasons: dict[str, set[str]] = {}
        # The server's State (server/mcp/state.py, which imports this module): its opened store, its
        # engine's replicas.
        self._state: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._memories: tuple[float, list[tuple[str, int]] | None] = (0.0, None)
        self._scraped = _ScrapeCollector(self)
        r.register(self._scraped)

    # -- what happens -----------------------------------------------------------------------------

    def attach(self, state: Any) -> None:
        """Follow ``state``'s engine (pools, memories) and receive the pipeline's hooks."""
        self._state = state
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        telemetry.add(self)

    def detach(self) -> None:
        telemetry.remove(self)

    def tool_call(self, tool: str, outcome: str, seconds: float) -> None:
        name = tool if tool in self.tools else "unknown"
        self.tool_calls.labels(name, outcome).inc()
        self.tool_seconds.labels(name).observe(seconds)

    def recalled(self, trace: Trace, returned: int) -> None:
        for st in trace.stages:
            self.stage_seconds.labels(st.stage).observe(st.ms / 1000)
            for prefix, family in (("degraded", self.degraded), ("skipped", self.skipped)):
                if st.status.startswith(prefix):
                    family.labels(st.stage, self._bounded(st.stage, telemetry.reason_of(st.status))).inc()
        self.returned.observe(returned)
        read_from = trace.read.get("read_from")
        if read_from is not None:
            fell_back = trace.read.get("read_reason") == "replica failed during the recall"
            self.reads.labels("fallback" if fell_back else str(read_from)).inc()

    def _bounded(self, stage: str, reason: str) -> str:
        seen = self._reasons.setdefault(stage, set())
        if reason not in seen and len(seen) >= REASONS_PER_STAGE:
            return "other"
        seen.add(reason)
        return reason

    # pipeline/telemetry.py's Observer
    def llm_call(
        self, stage: str, provider: str, outcome: str, seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        self.llm_calls.labels(stage, provider, outcome).inc()
        if outcome in ("error", "timeout"):
            self.llm_errors.labels(stage, provider).inc()
        if outcome in ("ok", "error", "timeout") and seconds > 0:
            self.llm_seconds.labels(stage, provider).observe(seconds)
        if input_tokens:
            self.llm_tokens.labels(stage, provider, "input").inc(input_tokens)
        if output_tokens:
            self.llm_tokens.labels(stage, provider, "output").inc(output_tokens)

    def embedded(self, kind: str, texts: int, seconds: float) -> None:
        self.embed_seconds.labels(kind).observe(seconds)
        self.embedded_texts.labels(kind).inc(texts)

    # -- what a scrape reads ----------------------------------------------------------------------

    async def refresh(self) -> None:
        """Read the memory counts if the cached ones are older than MEMORIES_TTL_S (on the loop)."""
        at, _ = self._memories
        if time.monotonic() - at < MEMORIES_TTL_S:
            return
        store = self._state.opened_store() if self._state is not None else None
        if store is None:
            return
        try:
            async with asyncio.timeout(SCRAPE_QUERY_TIMEOUT_S):
                rows = [(p.project, p.memories) for p in await store.project_summaries()]
        except Exception as e:  # noqa: BLE001 - a scrape must answer; the gauge is left out
            log.warning("metrics: could not read the memory counts (%s)", type(e).__name__)
            return
        self._memories = (time.monotonic(), rows)

    def refresh_from_thread(self) -> None:
        """``refresh`` from the stdio listener's thread, on the server's loop."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            asyncio.run_coroutine_threadsafe(self.refresh(), loop).result(SCRAPE_QUERY_TIMEOUT_S + 1)
        except Exception:  # noqa: BLE001 - the loop is busy or closing: the cached counts serve
            pass

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def _pools(self) -> Iterator[tuple[str, dict[str, int]]]:
        store = self._state.opened_store() if self._state is not None else None
        if store is None or store.pool is None:
            return
        yield "primary", store.pool.get_stats()
        replicas = self._state.engine.runtime.replicas if self._state is not None else None
        for i, replica in enumerate(replicas.replicas if replicas is not None else ()):
            if replica.pool is not None:
                yield f"replica{i + 1}", replica.pool.get_stats()

    def _memory_rows(self) -> list[tuple[str, int]] | None:
        return self._memories[1]


class _ScrapeCollector(Collector):
    """What is read when scraped: the pools (in-process numbers) and the cached memory counts."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def describe(self) -> list[Any]:
        return []  # (collected at scrape time only)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        m = self.m
        size = GaugeMetricFamily(
            "memlane_db_pool_size", "Connections the pool holds, by pool.", labels=["pool"]
        )
        in_use = GaugeMetricFamily(
            "memlane_db_pool_in_use", "Connections lent to calls now, by pool.", labels=["pool"]
        )
        waiting = GaugeMetricFamily(
            "memlane_db_pool_waiting", "Calls waiting for a connection now, by pool.", labels=["pool"]
        )
        for name, stats in m._pools():
            pool_size = stats.get("pool_size", 0)
            size.add_metric([name], pool_size)
            in_use.add_metric([name], pool_size - stats.get("pool_available", 0))
            waiting.add_metric([name], stats.get("requests_waiting", 0))
        yield size
        yield in_use
        yield waiting
        rows = m._memory_rows()  # None until the store is open: the family without a sample
        cfg = m.config
        if cfg is not None and cfg.project_labels:
            g = GaugeMetricFamily(
                "memlane_memories", "Memories stored, by project (the largest ones).", labels=["project"]
            )
            top = sorted(rows or [], key=lambda r: -r[1])
            for project, n in top[: cfg.project_label_limit]:
                g.add_metric([project], n)
            rest = sum(n for _, n in top[cfg.project_label_limit :])
            if rest:
                g.add_metric(["_other"], rest)
        else:
            g = GaugeMetricFamily("memlane_memories", "Memories stored.")
            if rows is not None:
                g.add_metric([], sum(n for _, n in rows))
        yield g


class Listener:
    """``[telemetry] metrics_port`` for a stdio server: /metrics on the loopback, in a thread."""

    def __init__(self, metrics: Metrics, port: int) -> None:
        from wsgiref.simple_server import WSGIRequestHandler, make_server

        class Quiet(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # stdout is the protocol
                pass

        def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
            if environ.get("PATH_INFO") != "/metrics":
                start_response("404 Not Found", [("Content-Type", "text/plain")])
                return [b"memlane: metrics are at /metrics\n"]
            metrics.refresh_from_thread()
            body = metrics.exposition()
            start_response("200 OK", [("Content-Type", CONTENT_TYPE), ("Content-Length", str(len(body)))])
            return [body]

        self.server = make_server("127.0.0.1", port, app, handler_class=Quiet)
        self.thread = threading.Thread(target=self.server.serve_forever, name="memlane-metrics", daemon=True)
        self.thread.start()
        log.info("Prometheus metrics on http://127.0.0.1:%d/metrics", port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
