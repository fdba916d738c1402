"""The memories table's columns as the engine reads them."""

from __future__ import annotations

from typing import Any

from ..records import Memory

MEMORY_COLUMNS = (
    "id, project, content, category, tags, metadata, pinned, priority, occurred_at, created_at, "
    "updated_at, expires_at, source, position, topics, fact_type"
)


def row_to_memory(r: dict[str, Any]) -> Memory:
    return Memory(
        id=r["id"],
        project=r["project"],
        content=r["content"],
        category=r["category"],
        tags=tuple(r["tags"] or ()),
        metadata=r["metadata"] or {},
        pinned=r["pinned"],
        priority=r["priority"],
        occurred_at=r["occurred_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        expires_at=r["expires_at"],
        source=r["source"],
        position=r.get("position"),
        # Only Store.get joins the access statistics (memory_access); elsewhere they are not read.
        access_count=r.get("access_count") or 0,
        last_accessed_at=r.get("last_accessed_at"),
        topics=tuple(r["topics"]) if r.get("topics") is not None else None,
        fact_type=r.get("fact_type"),
    )
