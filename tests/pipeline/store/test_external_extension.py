"""A managed-service database: memlane's role owns the database but is no superuser, and pgvector
is not marked trusted, so the role cannot create the ``vector`` extension itself. memlane must
say, before making any table, which statement an administrator runs; once that is done the same
role opens the store and works."""

from __future__ import annotations

import re
import uuid

import psycopg
import pytest

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.errors import StoreError
from memlane.pipeline.store import migrate

pytestmark = pytest.mark.anyio


def _tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]


@pytest.mark.slow
async def test_a_role_that_may_not_create_pgvector_is_told_the_sql_then_works(
    external_pg, open_engine, tmp_path
):
    name = "bare_" + uuid.uuid4().hex[:10]
    url = external_pg.create_app_database(name, name, with_extension=False)
    # The premise: the role really cannot create it (pgvector's control file is not trusted).
    with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("CREATE EXTENSION vector")

    cfg = EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=url))
    with pytest.raises(StoreError) as raised:
        await open_engine(cfg)
    message = str(raised.value)
    assert f"database {name!r}" in message and f"role {name!r}" in message, message
    assert "superuser" in message and "pgvector 0.8.0 or newer" in message, message
    assert _tables(url) == []  # nothing half-made: no migration ran

    sql = re.search(r": (CREATE EXTENSION vector;)", message).group(1)
    external_pg.execute(sql, database=name)
    engine = await open_engine(cfg)
    await engine.remember({"content": "The ledger runs on a managed PostgreSQL", "project": "ext"})
    found = await engine.recall(dict(query="where does the ledger run?", project="ext"))
    assert found.memories[0][0].content == "The ledger runs on a managed PostgreSQL"
    with psycopg.connect(url) as conn:
        [superuser] = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    assert superuser is False


@pytest.mark.slow
async def test_an_old_pgvector_is_refused_with_the_upgrade_statement(external_pg, open_engine, tmp_path):
    name = "old_" + uuid.uuid4().hex[:10]
    url = external_pg.create_app_database(name, name)
    # The catalog as an older pgvector leaves it (the package ships only the newest install script).
    external_pg.execute(
        "UPDATE pg_extension SET extversion = '0.7.4' WHERE extname = 'vector'", database=name
    )
    cfg = EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=url))
    with pytest.raises(StoreError) as raised:
        await open_engine(cfg)
    assert f"database {name!r} has pgvector 0.7.4; memlane needs 0.8.0" in str(raised.value)
    assert "ALTER EXTENSION vector UPDATE;" in str(raised.value)
    assert _tables(url) == []
    [[version]] = external_pg.execute(
        "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
    )
    external_pg.execute(
        f"UPDATE pg_extension SET extversion = '{version}' WHERE extname = 'vector'", database=name
    )
    await open_engine(cfg)


def test_versions_compare_by_number():
    assert migrate._version("0.7.4") < migrate.PGVECTOR_MIN <= migrate._version("0.8.0")
    assert migrate._version("0.10.1") > migrate.PGVECTOR_MIN
