"""Databases on the session's embedded PostgreSQL."""

from __future__ import annotations

import uuid

import psycopg


def with_db(dsn: str, name: str) -> str:
    """``dsn`` pointed at database ``name`` (its query string kept)."""
    base, _, query = dsn.partition("?")
    base = base.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


def new_database(root_dsn: str) -> str:
    """Creates a new, empty database on the server of ``root_dsn``; returns its DSN."""
    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(root_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_db(root_dsn, name)
