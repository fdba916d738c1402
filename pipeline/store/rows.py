"""The memories table's rows: what a write inserts, and its columns as the engine reads them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memlane.pipeline.records import Memory

MEMORY_COLUMNS = (
    "id, project, content, category, tags, metadata, pinned, priority, occurred_at, created_at, "
    "updated_at, expires_at, source, position, topics, fact_type"
)

# A memory's access statistics beside its columns (``m``): recall's reads take them with the memory,
# so stage 8 needs no read of its own (one round trip fewer per recall).
ACCESS_COLUMNS = "a.access_count, a.last_accessed_at"
ACCESS_JOIN = "LEFT JOIN memory_access a ON a.memory_id = m.id"


MEMORY_NAMES = tuple(c.strip() for c in MEMORY_COLUMNS.split(","))
MEMORY_WIDTH = len(MEMORY_NAMES)
M_MEMORY_COLUMNS = ", ".join("m." + c for c in MEMORY_NAMES)  # the same, of a table aliased m


def row_to_memory(r: dict[str, Any]) -> Memory:
    """A memory from a dict row holding MEMORY_COLUMNS (and the access statistics, if read)."""
    access = (r["access_count"], r["last_accessed_at"]) if "access_count" in r else None
    return values_to_memory([r.get(name) for name in MEMORY_NAMES], access)


def values_to_memory(v, access: tuple[int | None, Any] | None = None) -> Memory:
    """A memory from MEMORY_COLUMNS' values in their order (a tuple row: the recall path reads a
    hundred rows a statement, and a dict per row cost as much as the mapping). ``access``: the
    access statistics read with it (``ACCESS_COLUMNS``), or None when they were not read."""
    return Memory(
        id=v[0],
        project=v[1],
        content=v[2],
        category=v[3],
        tags=tuple(v[4] or ()),
        metadata=v[5] or {},
        pinned=v[6],
        priority=v[7],
        occurred_at=v[8],
        created_at=v[9],
        updated_at=v[10],
        expires_at=v[11],
        source=v[12],
        position=v[13],
        topics=tuple(v[14]) if v[14] is not None else None,
        fact_type=v[15],
        access_count=(access[0] or 0) if access is not None else 0,
        last_accessed_at=access[1] if access is not None else None,
        access_known=access is not None,
    )


@dataclass(frozen=True, slots=True)
class StoredRow:
    """What to insert: validated fields plus the embedding."""

    project: str
    content: str
    content_hash: str
    embedding: list[float]
    category: str | None
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    pinned: bool
    priority: int
    occurred_at: datetime | None
    expires_at: datetime | None
    source: str | None
    position: int | None = None
    # Given no position: continue ``source``'s sequence (position = its last + 1, linked ``next``).
    # None: no sequence. ``sequence_gap_s``: only when the source's last memory was stored at most
    # this many seconds ago and happened at most this far from this one (else a gap: a new segment);
    # None: always (the caller named the source).
    sequence: bool = False
    sequence_gap_s: float | None = None
    topics: tuple[str, ...] | None = None  # None: not assigned (topics off)
    fact_type: str | None = None
    # The automatic topics this row joins, with the key terms a topic gets if this row creates it:
    # their centroids take the row's embedding when the row is created (not for a duplicate).
    auto_topics: tuple[tuple[str, tuple[str, ...]], ...] = ()
