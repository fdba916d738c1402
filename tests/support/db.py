"""Databases on the session's embedded PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid

import psycopg

from memlane.pipeline.store import migrate


def with_db(dsn: str, name: str) -> str:
    """``dsn`` pointed at database ``name`` (its query string kept)."""
    base, _, query = dsn.partition("?")
    base = base.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


def new_database(root_dsn: str, template: str | None = None) -> str:
    """Creates a new database on the server of ``root_dsn``: empty, or a copy of database
    ``template``; returns its DSN."""
    name = "t_" + uuid.uuid4().hex[:12]
    copy = f' TEMPLATE "{template}"' if template else ""
    with psycopg.connect(root_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"{copy}')
    return with_db(root_dsn, name)


def migrated_template(root_dsn: str) -> str:
    """A database at the latest schema, made by memlane's own migrations, to copy each test's
    database from; returns its name. Nothing may stay connected to it: PostgreSQL copies a
    database only while no one is."""
    dsn = new_database(root_dsn)

    async def _migrate() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await migrate.migrate(conn)

    asyncio.run(_migrate())
    return dsn.partition("?")[0].rsplit("/", 1)[1]


def drop_database(root_dsn: str, dsn: str) -> None:
    """Drops the database of ``dsn``, ending what is still connected to it (a test's left-over
    pool): the session's server keeps its data in memory where it can, and a suite's worth of
    databases would not fit."""
    name = dsn.partition("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(root_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
