"""``mcp-memory-service``: its SQLite database (``sqlite_vec.db``) or its JSON export
(``{"export_metadata": ..., "memories": [...]}``).

The database is opened read-only and without its vector extension: only the plain ``memories``
table is read (``content``, ``tags`` as comma-separated text, ``memory_type``, ``metadata`` as JSON
text, ``created_at`` in Unix seconds). Rows soft-deleted (``deleted_at``, since its v8.64) or
replaced by a newer version (``superseded_by``) are skipped. The content, tags, type (as the
category), metadata and time are kept; the content hash is the original id.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.importers.records import Fact, Record, Skip, WrongFormat, load_json, peek, shape, when

EXPECTS = "its SQLite database (a 'memories' table with content_hash, content, tags) or its JSON export"
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    # mode=ro: never written (not even its WAL checkpointed); the vec0 table is never touched.
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _columns(conn: sqlite3.Connection) -> set[str]:
    return {row[1] for row in conn.execute("PRAGMA table_info(memories)")}


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def detect(path: Path) -> str | None:
    if not path.is_file():
        return None
    if _is_sqlite(path):
        try:
            with _connect(path) as conn:
                if {"content", "content_hash", "tags"} <= _columns(conn):
                    return "a SQLite database with a memories table (content_hash, content, tags)"
        except sqlite3.Error:
            return None
        return None
    head = peek(path)
    if head.lstrip().startswith("{") and '"export_metadata"' in head:
        return "a JSON export with export_metadata and memories"
    return None


def read(path: Path) -> Iterator[Record]:
    if path.is_file() and _is_sqlite(path):
        yield from _database(path)
        return
    data = load_json(path, "mcp-memory-service", EXPECTS)
    if not (isinstance(data, dict) and isinstance(data.get("memories"), list)):
        raise WrongFormat(path, "mcp-memory-service", EXPECTS, shape(data))
    for m in data["memories"]:
        if not isinstance(m, dict) or not isinstance(m.get("content"), str):
            yield Skip("memory without content")
            continue
        tags = m.get("tags") or []
        yield _fact(m, tags.split(",") if isinstance(tags, str) else tags)


def _database(path: Path) -> Iterator[Record]:
    try:
        conn = _connect(path)
    except sqlite3.Error as e:
        raise InvalidInput(f"cannot open {path} read-only: {e}") from None
    try:
        cols = _columns(conn)
        if not {"content", "content_hash"} <= cols:
            raise WrongFormat(
                path,
                "mcp-memory-service",
                EXPECTS,
                f"a SQLite database with tables {', '.join(_tables(conn)) or '(none)'}",
            )
        wanted = [
            c
            for c in (
                "content_hash",
                "content",
                "tags",
                "memory_type",
                "metadata",
                "created_at",
                "created_at_iso",
                "deleted_at",
                "superseded_by",
            )
            if c in cols
        ]
        cur = conn.execute(f"SELECT {', '.join(wanted)} FROM memories ORDER BY id")
        for values in cur:
            row = dict(zip(wanted, values, strict=True))
            if row.get("deleted_at") is not None:
                yield Skip("deleted")
                continue
            if row.get("superseded_by"):
                yield Skip("superseded")
                continue
            if not isinstance(row.get("content"), str) or not row["content"].strip():
                yield Skip("empty memory")
                continue
            row["metadata"] = _json_object(row.get("metadata"))
            yield _fact(row, str(row.get("tags") or "").split(","))
    except sqlite3.Error as e:
        raise InvalidInput(f"cannot read {path}: {e}") from None
    finally:
        conn.close()


def _json_object(text: Any) -> dict[str, Any]:
    if isinstance(text, dict):
        return text
    try:
        value = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _fact(m: dict[str, Any], tags: list[Any]) -> Fact:
    return Fact(
        content=m["content"].strip(),
        id=str(m.get("content_hash") or ""),
        occurred_at=when(m.get("created_at")) or when(m.get("created_at_iso")),
        tags=tuple(t.strip() for t in tags if isinstance(t, str) and t.strip()),
        category=m.get("memory_type") or None,
        metadata=_json_object(m.get("metadata")),
    )
