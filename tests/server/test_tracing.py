"""OpenTelemetry traces (server/tracing.py): a tool call's span under the MCP SDK's own, a child per
recall stage with its status and counts, per write step, per statement of the store; no memory
text or query in any attribute; a real ``memlane serve`` exporting OTLP over HTTP to a receiver
here; nothing imported or recorded when no ``OTEL_*`` variable asks for traces."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from mcp import Client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from support.clients import call_ok
from support.processes import server_env, stdio_params

from memlane.pipeline import telemetry
from memlane.pipeline.engine import Engine
from memlane.server import tracing
from memlane.server.mcp.app import build_server

pytestmark = pytest.mark.anyio

CONTENT = "Quillon-fern-5520 signs the vendor contracts"
QUESTION = "who signs the vendor contracts?"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    assert tracing.configure(exporter)
    yield exporter
    telemetry.set_tracer(None)
    exporter.shutdown()  # (the process's provider stays; this exporter keeps nothing more)


def _attribute_values(span) -> list[str]:
    return [str(v) for v in (span.attributes or {}).values()]


async def test_a_recall_is_a_tool_span_under_the_sdks_with_a_span_per_stage_and_statement(
    settings, embedder, spans
):
    server, state = build_server(settings, engine=Engine(settings.engine(), embedder=embedder))
    try:
        async with Client(server) as client:
            await call_ok(client, "remember", {"content": CONTENT, "project": "legal"})
            got = await call_ok(client, "recall", {"query": QUESTION, "project": "legal"})
            assert got["memories"]
            assert (await client.call_tool("remember", {"content": ""})).is_error
    finally:
        await state.close()
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}

    def parent(s):
        return by_id.get(s.parent.span_id) if s.parent is not None else None

    def one(name):
        found = [s for s in finished if s.name == name]
        assert len(found) == 1, (name, sorted({s.name for s in finished}))
        return found[0]

    tool = one("memlane.tool recall")
    assert parent(tool).name == "tools/call recall"  # the MCP SDK's span is the parent
    assert tool.attributes["memlane.outcome"] == "ok"
    stages = [s for s in finished if s.name.startswith("recall.") and parent(s) is tool]
    names = {s.name for s in stages}
    assert {"recall.intent", "recall.retrieval", "recall.fusion", "recall.assembly"} <= names, names
    retrieval = one("recall.retrieval")
    assert retrieval.attributes["memlane.stage.status"] == "ran"
    assert retrieval.attributes["memlane.stage.out"] >= 1
    assert one("recall.rerank").attributes["memlane.stage.reason"] == "no llm provider"
    statements = [s for s in finished if s.name.startswith("db ") and parent(s) is retrieval]
    assert statements and all(s.attributes["db.system.name"] == "postgresql" for s in statements)
    assert all(s.context.trace_id == tool.context.trace_id for s in stages + statements)

    remember = [s for s in finished if s.name == "memlane.tool remember"]
    assert [s.attributes["memlane.outcome"] for s in remember] == ["ok", "invalid_input"]
    insert = one("remember.insert")
    assert parent(insert) is remember[0]
    assert any(s.name == "db INSERT" or s.name.startswith("db ") for s in finished if parent(s) is insert)
    for s in finished:
        for v in _attribute_values(s):
            assert "Quillon" not in v and "vendor contracts" not in v, (s.name, v)
    print("\n" + "\n".join(f"{s.name} <- {parent(s).name if parent(s) else '-'} {dict(s.attributes or {})}"
                           for s in finished if s.context.trace_id == tool.context.trace_id and not s.name.startswith("db "))[:3000])  # fmt: skip


def test_without_otel_variables_nothing_is_imported_or_recorded(tmp_path):
    env = {k: v for k, v in server_env(tmp_path).items() if not k.startswith("OTEL_")}
    code = (
        "import sys; from memlane.server import tracing; from memlane.pipeline import telemetry\n"
        "assert tracing.configure() is False and not telemetry.tracing()\n"
        "assert 'opentelemetry.sdk' not in sys.modules, 'the SDK was imported'\n"
        "assert tracing.configured({'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://x:4318'})\n"
        "assert not tracing.configured({'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://x', 'OTEL_SDK_DISABLED': 'true'})\n"
        "assert not tracing.configured({'OTEL_EXPORTER_OTLP_ENDPOINT': 'http://x', 'OTEL_TRACES_EXPORTER': 'none'})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


class _Receiver(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 - the standard library's name
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        if self.path == "/v1/traces":
            _Receiver.bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format, *args) -> None:
        pass


@pytest.mark.slow
async def test_a_stdio_server_exports_its_spans_over_otlp_http_to_a_receiver(tmp_path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    _Receiver.bodies = []
    receiver = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    env = server_env(
        tmp_path / "data",
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{receiver.server_port}",
        OTEL_SERVICE_NAME="memlane-test",
        OTEL_BSP_SCHEDULE_DELAY="200",
    )
    try:
        async with Client(stdio_params(env=env)) as client:
            await call_ok(client, "remember", {"content": CONTENT, "project": "legal"})
            await call_ok(client, "recall", {"query": QUESTION, "project": "legal"})
        # The client has closed stdin and the server has exited: its exit flushed the spans.
    finally:
        receiver.shutdown()
    received = []
    services = set()
    for body in _Receiver.bodies:
        req = ExportTraceServiceRequest.FromString(body)
        for rs in req.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            for ss in rs.scope_spans:
                received += list(ss.spans)
    assert services == {"memlane-test"}
    by_id = {s.span_id: s for s in received}
    tool = next(s for s in received if s.name == "memlane.tool recall")
    assert by_id[tool.parent_span_id].name == "tools/call recall"
    stages = [s for s in received if s.parent_span_id == tool.span_id]
    assert {"recall.retrieval", "recall.fusion"} <= {s.name for s in stages}
    for s in received:
        for a in s.attributes:
            assert "Quillon" not in str(a.value) and "vendor contracts" not in str(a.value)
    lines = []
    for s in sorted(
        (s for s in received if s.trace_id == tool.trace_id), key=lambda s: s.start_time_unix_nano
    ):
        attrs = {a.key: a.value.string_value or a.value.int_value for a in s.attributes}
        par = by_id[s.parent_span_id].name if s.parent_span_id in by_id else "-"
        if not s.name.startswith("db "):
            lines.append(f"{s.name} <- {par} {attrs}")
    db = sum(1 for s in received if s.trace_id == tool.trace_id and s.name.startswith("db "))
    print(
        f"\nreceived {len(received)} spans; the recall's trace:\n" + "\n".join(lines) + f"\n(+ {db} db spans)"
    )
