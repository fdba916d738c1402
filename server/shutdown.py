"""Exit cleanly on SIGTERM, which is how MCP hosts and service managers stop a server.

Python's default for SIGTERM is to die on the spot: no atexit handlers, so the embedded PostgreSQL
(stopped by the last process using it, from an atexit handler) would keep running. Raising
SystemExit is not enough in stdio mode either: the thread blocked reading stdin is joined at
interpreter exit, before atexit runs, and never returns. So the handler runs the atexit handlers
itself and leaves with os._exit. Writes are single transactions, so nothing is half-written.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys

log = logging.getLogger("memlane.server")


def _on_sigterm(signum, frame) -> None:
    log.info("SIGTERM received: stopping")
    try:
        atexit._run_exitfuncs()  # stops the embedded database if this was its last user
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
        os._exit(0)


def exit_cleanly_on_sigterm() -> None:
    """Call from the main thread before serving. (uvicorn swaps in its own handler while it serves,
    shuts down gracefully, then restores this one and re-raises the signal.)"""
    signal.signal(signal.SIGTERM, _on_sigterm)
