"""``--log-format json``: one JSON object a line on stderr (time, level, logger, message, the
traceback, the trace id inside a traced call), secrets redacted as in the text lines, and
``memlane serve --log-format json`` writing nothing else to stderr."""

from __future__ import annotations

import io
import json
import logging
import subprocess
from datetime import datetime

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from support.processes import MEMLANE, initialize, server_env

from memlane.server import logs


@pytest.fixture
def json_stderr(monkeypatch):
    """stderr as a buffer, logging set up in JSON; the root logger restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buf = io.StringIO()
    monkeypatch.setattr("sys.stderr", buf)
    logs.setup("INFO", "json")
    yield buf
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def lines(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_json_lines_carry_time_level_logger_message_and_traceback_with_secrets_redacted(json_stderr):
    log = logging.getLogger("memlane.test")
    log.info("stored %d memories for %s", 3, "acme")
    key = "sk-ant-api03-" + "a1B2c3D4e5F6g7H8i9J0" * 4
    log.warning("a client sent %s", key)
    try:
        raise ValueError(f"bad value {key}")
    except ValueError:
        log.exception("the call failed")
    first, second, third = lines(json_stderr)
    assert first["message"] == "stored 3 memories for acme"
    assert (first["level"], first["logger"]) == ("INFO", "memlane.test")
    assert datetime.fromisoformat(first["time"]).utcoffset().total_seconds() == 0
    assert set(first) == {"time", "level", "logger", "message"}  # no trace: no trace_id
    assert key not in json_stderr.getvalue() and second["level"] == "WARNING"
    assert "Traceback" in third["exception"] and "ValueError" in third["exception"]


def test_a_line_logged_inside_a_traced_call_carries_its_trace_id(json_stderr):
    ctx = SpanContext(trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736, span_id=0x00F067AA0BA902B7, is_remote=False,
                      trace_flags=TraceFlags(TraceFlags.SAMPLED))  # fmt: skip
    with trace.use_span(NonRecordingSpan(ctx)):
        logging.getLogger("memlane.test").info("inside")
    logging.getLogger("memlane.test").info("outside")
    inside, outside = lines(json_stderr)
    assert inside["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert "trace_id" not in outside


@pytest.mark.slow
def test_serve_with_log_format_json_writes_only_json_lines(tmp_path):
    proc = subprocess.run(
        [MEMLANE, "serve", "--log-format", "json"],
        input=(json.dumps(initialize()) + "\n").encode(),
        env=server_env(tmp_path / "data"),
        capture_output=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert json.loads(proc.stdout.splitlines()[0])["id"] == 1  # the protocol, on stdout only
    objects = [json.loads(line) for line in proc.stderr.decode().splitlines()]
    assert any("serving stdio" in o["message"] for o in objects)
    assert all({"time", "level", "logger", "message"} <= set(o) for o in objects)
