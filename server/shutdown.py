"""Exit cleanly on SIGTERM and SIGINT, which is how MCP hosts, service managers and a person at a
terminal (Ctrl-C) stop a server.

Python's default for SIGTERM is to die on the spot: no atexit handlers, so the embedded PostgreSQL
(stopped by the last process using it, from an atexit handler) would keep running. Its default for
SIGINT, KeyboardInterrupt, is no better in stdio mode, nor is raising SystemExit: the thread blocked
reading stdin is joined at interpreter exit, before atexit runs, and never returns. So the handler
runs the atexit handlers itself and leaves with os._exit. The embedded database's handler stops a
start under way (pipeline/store/embedded.py); writes are single transactions, so nothing is
half-written. A second signal while the first one's exit runs is ignored: that exit is bounded.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys

log = logging.getLogger("memlane.server")

_exiting = False


def _on_signal(signum, frame) -> None:
    global _exiting
    embedded = sys.modules.get("memlane.pipeline.store.embedded")
    if _exiting or (embedded is not None and embedded.stopping()):
        return  # the exit under way (this handler's or the interpreter's own) finishes the job
    _exiting = True
    log.info("%s received: stopping", signal.Signals(signum).name)
    try:
        atexit._run_exitfuncs()  # stops the embedded database if this was its last user
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass
        # 0 on SIGTERM, a supervisor's normal stop; 130 on SIGINT, as a shell expects after Ctrl-C
        os._exit(0 if signum == signal.SIGTERM else 128 + signum)


def exit_cleanly_on_signals(*, sigint: bool) -> None:
    """Call from the main thread before serving. ``sigint``: SIGINT too (the servers; a one-shot
    command keeps Python's KeyboardInterrupt, which unwinds it and says it was interrupted).
    (uvicorn swaps in its own handlers while it serves, shuts down gracefully, then restores these
    and re-raises the signal.)"""
    signal.signal(signal.SIGTERM, _on_signal)
    if sigint:
        signal.signal(signal.SIGINT, _on_signal)
