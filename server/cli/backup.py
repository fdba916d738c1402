"""``memlane backup [FILE]`` and ``memlane restore FILE [--force]`` (pipeline/store/backup.py does
the work; docs/backup.md). Neither opens the engine: opening migrates, and a backup must not change
the store it copies, nor a restore find a schema already made in its empty target."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlane.pipeline.config import data_dir_of
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.store import backup as backups
from memlane.pipeline.store.embedded import EmbeddedPostgres
from memlane.server import aio
from memlane.server.settings import Settings

TOKENS = "tokens.json"  # the name the tokens file has inside a backup's manifest


def data_dir(settings: Settings) -> Path:
    return data_dir_of(settings.data_dir)


def _dsn(settings: Settings) -> tuple[str, str]:
    """The store's DSN and what it is ("embedded in DIR" or "external"), starting the embedded server."""
    if settings.database.url is not None:
        return settings.database.url.get_secret_value(), "external database"
    return EmbeddedPostgres(data_dir(settings)).start(), f"embedded store in {data_dir(settings)}"


def _tokens_path(settings: Settings) -> Path:
    from memlane.server.auth.http import tokens_path  # the MCP SDK's auth stack: imported only here

    return tokens_path(settings)


def cmd_backup(args, settings: Settings) -> int:
    tokens = _tokens_path(settings)
    files = {TOKENS: tokens.read_text(encoding="utf-8")} if tokens.is_file() else {}
    dsn, where = _dsn(settings)
    started = time.monotonic()
    path, manifest = aio.run(
        backups.backup(
            dsn,
            Path(args.file) if args.file else None,
            data_dir=data_dir(settings),
            bin_dir=settings.backup.pg_bin_dir,
            files=files,
            compression=settings.backup.compression,
        )
    )
    out: dict[str, Any] = {"backup": str(path), "manifest": str(backups.manifest_path(path)), "of": where}
    out.update(manifest.summary())
    out["seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(out, indent=2))
    return 0


def cmd_restore(args, settings: Settings) -> int:
    path = Path(args.file).expanduser()
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist")
    manifest = backups.Manifest.read(path)
    tokens = _tokens_path(settings)
    saved = manifest.files.get(TOKENS)
    # Checked before anything is restored, so a refusal leaves the target as it was.
    if (
        saved is not None
        and tokens.exists()
        and tokens.read_text(encoding="utf-8") != saved
        and not args.force
    ):
        raise InvalidInput(
            f"{tokens} exists and differs from the backup's tokens: pass --force to replace it"
        )
    dsn, where = _dsn(settings)
    started = time.monotonic()
    aio.run(backups.restore(dsn, path, force=args.force, bin_dir=settings.backup.pg_bin_dir))
    if saved is not None:
        tokens.parent.mkdir(parents=True, exist_ok=True)
        tmp = tokens.with_name(tokens.name + ".restoring")
        tmp.write_text(saved, encoding="utf-8")
        tmp.chmod(0o600)
        tmp.replace(tokens)
    out: dict[str, Any] = {"restored": str(path), "into": where, "verified": True}
    out.update(manifest.summary())
    if saved is not None:
        out["tokens_file"] = str(tokens)
    out["seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(out, indent=2))
    return 0


def last_backup(folder_of: Path, now: datetime | None = None) -> dict[str, Any] | None:
    """The newest backup in DATA_DIR/backups, with its age, for ``memlane doctor``."""
    found = backups.listed(folder_of)
    if not found:
        return None
    newest = found[-1]
    named = backups.NAME_RE.fullmatch(newest.name)
    assert named is not None  # listed() keeps only the names it matches
    stamp = named.group(1)
    taken = datetime.strptime(stamp, "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    age = ((now or datetime.now(UTC)) - taken).total_seconds()
    return {"path": str(newest), "age": _age(age), "count": len(found)}


def _age(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{max(seconds, 0):.0f} seconds"
