"""A store migrated by a newer memlane (issue 27): refused, through the Engine and the CLI, with
both ways out (upgrade memlane, or restore a backup this memlane can read: the newest one in
DATA_DIR/backups when there is one), and left exactly as it was."""

from __future__ import annotations

import json

import psycopg
import pytest
from support import eras
from support.processes import run_memlane, server_env

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import StoreError
from memlane.pipeline.store import migrate

pytestmark = pytest.mark.anyio

LATEST = migrate.latest_version()
NEWER = f"the database schema is version {LATEST + 1}, newer than this memlane knows ({LATEST}): upgrade memlane, or "


async def _newer_store(database_url, embedder, data_dir) -> dict:
    """A store of this memlane with memories, accesses and topics, then marked as migrated by the
    next one; returns its snapshot."""
    config = EngineConfig(data_dir=data_dir, database=DatabaseConfig(url=database_url))
    eng = Engine(config, embedder=embedder)
    await eng.open()
    try:
        await eng.remember_many(
            [
                {"content": "The staging cluster is called Juniper", "project": "ops", "pinned": True},
                {"content": "Invoices are archived for seven years", "project": "finance"},
            ]
        )
        res = await eng.recall(dict(query="what is the staging cluster called?", project="ops"))
        await eng.store.count_accesses([m.id for m, _ in res.memories])
    finally:
        await eng.close()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memlane_migrations (version, name) VALUES (%s, 'from_the_future')", (LATEST + 1,)
        )
        assert conn.execute("SELECT count(*) FROM memory_access").fetchone()[0] > 0
        return eras.snapshot(conn)


def _backups(data_dir, *schemas_at: tuple[str, int]) -> None:
    d = data_dir / "backups"
    d.mkdir(parents=True, exist_ok=True)
    for stamp, schema in schemas_at:
        (d / f"memlane-{stamp}-schema{schema}.dump").write_bytes(b"PGDMP")


@pytest.mark.slow
async def test_a_newer_store_is_refused_naming_the_newest_backup_this_memlane_can_restore(
    database_url, embedder, tmp_path
):
    snap = await _newer_store(database_url, embedder, tmp_path)
    # The newest backup is of the newer schema: not one this memlane could restore.
    _backups(
        tmp_path,
        ("20261129-101500", LATEST - 1),
        ("20261130-091500", LATEST),
        ("20261201-080000", LATEST + 1),
    )
    restorable = tmp_path / "backups" / f"memlane-20261130-091500-schema{LATEST}.dump"
    message = NEWER + f"restore the backup taken before the upgrade: memlane restore {restorable}"

    eng = Engine(
        EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url)), embedder=embedder
    )
    with pytest.raises(StoreError) as e:
        await eng.open()
    assert str(e.value) == message
    assert eng.runtime.store is None

    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)
    recall = run_memlane("recall", "staging cluster", "--project", "ops", env=env)
    assert (recall.returncode, recall.stdout) == (1, "")
    assert recall.stderr.strip().splitlines()[-1] == f"memlane: {message}"
    doctor = run_memlane("doctor", "--json", env=env)
    assert doctor.returncode == 1
    report = json.loads(doctor.stdout)
    assert report["database_problem"] == message and report["status"] == "problems found"

    with psycopg.connect(database_url) as conn:
        assert eras.snapshot(conn) == snap  # no row, column, index or migration record changed


async def test_without_a_usable_backup_the_refusal_says_which_backup_would_do(
    database_url, embedder, tmp_path
):
    snap = await _newer_store(database_url, embedder, tmp_path)
    _backups(tmp_path, ("20261201-080000", LATEST + 1))
    eng = Engine(
        EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url)), embedder=embedder
    )
    with pytest.raises(StoreError) as e:
        await eng.open()
    assert str(e.value) == NEWER + "restore a backup made with this version (memlane restore FILE)"
    with psycopg.connect(database_url) as conn:
        assert eras.snapshot(conn) == snap
