"""Every row of every table memlane writes: what a rejected call must leave unchanged."""

from __future__ import annotations

import psycopg

TABLES = (
    ("memories", "id"),
    ("memory_access", "memory_id"),
    ("memlane_projects", "project"),
    ("memlane_lexemes", "project, lexeme"),
    ("memlane_settings", "key"),
)
DUMP = "SELECT " + ", ".join(
    f"(SELECT coalesce(json_agg(to_jsonb(t) ORDER BY {order})::text, '') FROM {table} t)"
    for table, order in TABLES
)


def dump(dsn: str) -> tuple[str, ...]:
    """Every row of every table memlane writes, in one round trip."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(DUMP).fetchone()
