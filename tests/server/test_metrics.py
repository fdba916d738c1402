"""Prometheus metrics (server/metrics.py): tool calls by tool and outcome through a real MCP client,
recall stages, memories returned, LLM calls and tokens by stage and provider, embedding time, the
pool and the memories stored read at scrape time; /metrics on the HTTP and SSE apps behind the
tokens; the stdio server's loopback listener; no memory text in the exposition, bounded labels."""

from __future__ import annotations

import json
import re
import time
import urllib.request

import httpx2 as httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families
from support.clients import call_ok
from support.llm_fakes import ScriptedLLM
from support.processes import free_port, server_env, stdio_params

from memlane.pipeline.engine import Engine
from memlane.pipeline.records import StageTrace, Trace
from memlane.server.auth.http import http_auth, token_store
from memlane.server.mcp.app import TOOLS, build_server
from memlane.server.mcp.serve import http_app
from memlane.server.metrics import REASONS_PER_STAGE, Metrics
from memlane.server.settings import TelemetryConfig

pytestmark = pytest.mark.anyio

SECRET_TEXT = "Zanzibar-owl-7731 guards the quarterly invoices"
TOOL_NAMES = [fn.__name__ for fn, _ in TOOLS]


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(text: str, name: str, **labels: str) -> float | None:
    return samples(text).get((name, tuple(sorted(labels.items()))))


async def test_tool_calls_recalls_llm_calls_and_embeddings_are_counted(settings, embedder):
    metrics = Metrics(settings.telemetry, tools=TOOL_NAMES)
    engine = Engine(settings.engine(), embedder=embedder, llm=ScriptedLLM())
    server, state = build_server(settings, engine=engine, metrics=metrics)
    try:
        async with Client(server) as client:
            await call_ok(client, "remember", {"content": SECRET_TEXT, "project": "fin"})
            await call_ok(client, "remember", {"content": "The team deploys on Tuesdays", "project": "ops"})
            got = await call_ok(
                client, "recall", {"query": "who guards the quarterly invoices?", "project": "fin"}
            )
            assert got["memories"]
            bad = [
                ("remember", {"content": "", "project": "fin"}),  # refused by memlane's checks
                ("remember", {"content": 42}),  # refused by the SDK's argument validation
                ("forget", {"id": "00000000-0000-0000-0000-000000000000"}),  # no such memory
                ("no_such_tool", {}),
            ]
            for tool, args in bad:
                assert (await client.call_tool(tool, args)).is_error
        await metrics.refresh()
        text = metrics.exposition().decode()
    finally:
        await state.close()
    print("\n" + "\n".join(line for line in text.splitlines() if not line.startswith("#"))[:4000])

    assert value(text, "memlane_tool_calls_total", tool="remember", outcome="ok") == 2
    assert value(text, "memlane_tool_calls_total", tool="recall", outcome="ok") == 1
    assert value(text, "memlane_tool_calls_total", tool="remember", outcome="invalid_input") == 2
    assert value(text, "memlane_tool_calls_total", tool="forget", outcome="invalid_input") == 1
    assert value(text, "memlane_tool_calls_total", tool="unknown", outcome="invalid_input") == 1
    assert value(text, "memlane_tool_call_duration_seconds_count", tool="recall") == 1
    assert value(text, "memlane_tool_call_duration_seconds_count", tool="remember") == 4
    assert value(text, "memlane_recall_memories_returned_count") == 1
    assert value(text, "memlane_recall_memories_returned_sum") == len(got["memories"])
    for stage in ("intent", "retrieval", "fusion", "assembly"):
        assert value(text, "memlane_recall_stage_duration_seconds_count", stage=stage) == 1, stage
    assert value(text, "memlane_llm_calls_total", stage="intent", provider="scripted", outcome="ok") == 1
    assert (
        value(text, "memlane_llm_tokens_total", stage="intent", provider="scripted", direction="input") == 100
    )
    assert value(text, "memlane_llm_call_duration_seconds_count", stage="intent", provider="scripted") == 1
    assert value(text, "memlane_embedding_duration_seconds_count", kind="passages") >= 2
    assert value(text, "memlane_embedding_duration_seconds_count", kind="queries") >= 1
    assert value(text, "memlane_embedded_texts_total", kind="passages") >= 2
    assert value(text, "memlane_memories") == 2  # no project label: [telemetry] project_labels is off
    assert value(text, "memlane_db_pool_size", pool="primary") >= 1
    assert value(text, "memlane_db_pool_waiting", pool="primary") == 0
    # Prometheus's conventions, and nothing of the memories in the exposition
    names = {f.name for f in text_string_to_metric_families(text)}
    assert all(n.startswith("memlane_") for n in names), names
    assert "Zanzibar" not in text and "Tuesdays" not in text and "project=" not in text


async def test_memories_per_project_only_when_allowed_and_at_most_the_limit(settings, embedder, tmp_path):
    cfg = TelemetryConfig(project_labels=True, project_label_limit=2)
    metrics = Metrics(cfg, tools=TOOL_NAMES)
    server, state = build_server(
        settings, engine=Engine(settings.engine(), embedder=embedder), metrics=metrics
    )
    try:
        async with Client(server) as client:
            for project, n in (("alpha", 3), ("beta", 2), ("gamma", 1), ("delta", 1)):
                for i in range(n):
                    await call_ok(
                        client, "remember", {"content": f"Fact number {i} of {project}", "project": project}
                    )
        await metrics.refresh()
        text = metrics.exposition().decode()
        assert value(text, "memlane_memories", project="alpha") == 3
        assert value(text, "memlane_memories", project="beta") == 2
        assert value(text, "memlane_memories", project="_other") == 2
        assert value(text, "memlane_memories", project="gamma") is None
        t0 = time.perf_counter()
        await metrics.refresh()  # cached: no query
        assert time.perf_counter() - t0 < 0.01
    finally:
        await state.close()


def test_stage_reasons_and_replica_routing_from_a_recall_trace():
    m = Metrics(None, tools=TOOL_NAMES)

    def trace(status: str, read: dict | None = None) -> Trace:
        st = StageTrace(stage="rerank", ms=1.5, count_in=3, count_out=3, status=status)
        return Trace(stages=[st], read=read or {})

    m.recalled(trace("degraded: LLMError: HTTP 503 from https://api.example.com (took 1.2 s)"), 3)
    m.recalled(trace("skipped: fast path (simple question: 4 words)"), 3)
    for i in range(REASONS_PER_STAGE + 5):
        m.recalled(trace(f"skipped: reason {chr(97 + i)} number {i}"), 0)
    m.recalled(trace("ran", {"read_from": "replica", "replica": "r1"}), 1)
    m.recalled(trace("ran", {"read_from": "primary", "read_reason": "replica failed during the recall"}), 1)
    m.recalled(trace("ran", {"read_from": "primary", "read_reason": "no replica caught up"}), 1)
    text = m.exposition().decode()
    assert value(text, "memlane_recall_stages_degraded_total", stage="rerank", reason="llmerror") == 1
    assert value(text, "memlane_recall_stages_skipped_total", stage="rerank", reason="fast path") == 1
    reasons = {
        dict(k[1])["reason"]
        for k in samples(text)
        if k[0] in ("memlane_recall_stages_skipped_total", "memlane_recall_stages_degraded_total")
    }
    assert len(reasons) == REASONS_PER_STAGE + 1 and "other" in reasons  # per stage; the rest: "other"
    assert value(text, "memlane_recall_stages_skipped_total", stage="rerank", reason="other") == 7
    assert "api.example.com" not in text and "503" not in text
    for target in ("replica", "fallback", "primary"):
        assert value(text, "memlane_recall_reads_total", target=target) == 1


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_metrics_endpoint_needs_a_token_for_every_project_once_tokens_exist(
    settings, embedder, transport
):
    store = token_store(settings)
    everything, _ = store.create("prometheus", ["*"])
    narrow, _ = store.create("acme-bot", ["acme*"])
    auth = http_auth(settings, host="127.0.0.1", port=8765, path="/mcp", store=store)
    metrics = Metrics(settings.telemetry, tools=TOOL_NAMES)
    server, state = build_server(
        settings, engine=Engine(settings.engine(), embedder=embedder), auth=auth, metrics=metrics
    )
    app = http_app(settings, server, state, auth, transport=transport, host="127.0.0.1")
    state.start()
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            assert (await c.get("/metrics")).status_code == 401
            r = await c.get("/metrics", headers={"Authorization": f"Bearer {narrow}"})
            assert r.status_code == 403 and "every project" in r.headers["www-authenticate"]
            r = await c.get("/metrics", headers={"Authorization": f"Bearer {everything}"})
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
            assert "memlane_tool_calls_total" in r.text or "memlane_tool_calls" in r.text
            assert "memlane_build_info" in r.text
    finally:
        await state.close()


@pytest.mark.slow
async def test_a_stdio_server_serves_metrics_on_the_loopback_port_it_is_given(tmp_path):
    port = free_port()
    env = server_env(tmp_path / "data", MEMLANE_TELEMETRY__METRICS_PORT=str(port))
    async with Client(stdio_params(env=env)) as client:
        await call_ok(client, "remember", {"content": SECRET_TEXT, "project": "fin"})
        await call_ok(client, "recall", {"query": "who guards the invoices?", "project": "fin"})
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = r.read().decode()
    assert value(text, "memlane_tool_calls_total", tool="remember", outcome="ok") == 1
    assert value(text, "memlane_tool_calls_total", tool="recall", outcome="ok") == 1
    assert value(text, "memlane_memories") == 1
    assert "Zanzibar" not in text


def test_the_grafana_dashboard_plots_every_family_and_only_families_that_exist():
    from pathlib import Path

    dashboard = json.loads(
        (Path(__file__).parents[2] / "docs" / "grafana" / "memlane-dashboard.json").read_text()
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {re.sub(r"_(bucket|sum|count)$", "", n) for e in exprs for n in re.findall(r"memlane_[a-z_]+", e)}
    types = {
        line.split()[2]
        for line in Metrics(None, tools=TOOL_NAMES).exposition().decode().splitlines()
        if line.startswith("# TYPE")
    }
    assert used - types == set(), "the dashboard plots what no server exposes"
    assert types - used == {"memlane_build_info"}, "a family the dashboard does not plot"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dashboard["panels"])
