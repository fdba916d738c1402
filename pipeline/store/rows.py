"""The memories table's columns, declared once (``COLUMNS``): which a write inserts and how, which a
read maps to a ``Memory`` field and how, which an update may set. The INSERT statement, the column
lists of every read, ``StoredRow``'s values and the row-to-``Memory`` mapping are derived from it.

A new column is a migration (``migrations/``), a ``Column`` here, and the field of the records
that carry it: ``Memory`` (read; same name, same order) and ``MemoryInput`` (written from what the
caller gives; same name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

from memlane.pipeline.records import Memory


def _vector(value: Any) -> np.ndarray:
    return np.asarray(value, dtype=np.float32)


def _jsonb_list(value: Any) -> Jsonb | None:
    return Jsonb(list(value)) if value is not None else None


def _tuple_or_none(value: Any) -> tuple[str, ...] | None:
    return tuple(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    # The element type of the INSERT's parameter array (``unnest(%s::<type>[])``); None: the
    # database fills it (its default), the write path never gives it.
    written: str | None = None
    read: bool = True  # a field of ``Memory``, in this order
    updatable: bool = False  # ``Store.update`` may set it (``MemoryPatch``, reembed, topics)
    # How the INSERT takes it from the unnested row ``r``, when not as it is (``r.<name>``).
    select: str | None = None
    insert: Callable[[Any], Any] | None = None  # a value as the INSERT's array element
    update: Callable[[Any], Any] | None = None  # a value as ``Store.update``'s parameter
    decode: Callable[[Any], Any] | None = None  # the column's value as the ``Memory`` field


# A list of text goes in as jsonb: an array of text arrays of different lengths is no SQL array.
_TEXTS_OF_JSONB = "ARRAY(SELECT jsonb_array_elements_text(r.{name}))"

COLUMNS: tuple[Column, ...] = (
    Column("id"),
    Column("project", "text"),
    Column("content", "text", updatable=True),
    Column("content_hash", "text", read=False),
    # %b: the vectors go in pgvector's binary format (``INSERT`` below).
    Column("embedding", "vector", read=False, updatable=True, insert=_vector, update=_vector),
    Column("category", "text", updatable=True),
    Column(
        "tags",
        "jsonb",
        updatable=True,
        select=_TEXTS_OF_JSONB.format(name="tags"),
        insert=_jsonb_list,
        update=list,
        decode=lambda v: tuple(v or ()),
    ),
    Column("metadata", "jsonb", updatable=True, insert=Jsonb, update=Jsonb, decode=lambda v: v or {}),
    Column("pinned", "bool", updatable=True),
    Column("priority", "int2", updatable=True),
    Column("occurred_at", "timestamptz", updatable=True),
    Column("created_at"),
    Column("updated_at"),
    Column("expires_at", "timestamptz", updatable=True),
    Column("source", "text"),
    Column("position", "int4"),  # order within its source (a turn, a chunk); migration 0005
    Column(
        "topics",  # best first; None: not assigned (topics off); migration 0007
        "jsonb",
        updatable=True,
        select="CASE WHEN r.topics IS NULL THEN NULL ELSE " + _TEXTS_OF_JSONB.format(name="topics") + " END",
        insert=_jsonb_list,
        update=list,
        decode=_tuple_or_none,
    ),
    Column("fact_type", "text", updatable=True),
    # Set by supersession (store/supersession.py), never by a write; migration 0013.
    Column("superseded_by"),
    Column("valid_until"),
    Column("conflicts_with", decode=_tuple_or_none),
    # The time the content names, resolved at write time (time/events.py); migration 0014.
    Column("event_start", "timestamptz", updatable=True),
    Column("event_end", "timestamptz", updatable=True),
)

READ = tuple(c for c in COLUMNS if c.read)
WRITTEN = tuple(c for c in COLUMNS if c.written is not None)
UPDATABLE = frozenset(c.name for c in COLUMNS if c.updatable)
BY_NAME = {c.name: c for c in COLUMNS}

MEMORY_NAMES = tuple(c.name for c in READ)
MEMORY_COLUMNS = ", ".join(MEMORY_NAMES)
MEMORY_WIDTH = len(MEMORY_NAMES)
M_MEMORY_COLUMNS = ", ".join("m." + c for c in MEMORY_NAMES)  # the same, of a table aliased m

# A memory's access statistics beside its columns (``m``): recall's reads take them with the memory,
# so stage 8 needs no read of its own (one round trip fewer per recall).
ACCESS_COLUMNS = "a.access_count, a.last_accessed_at"
ACCESS_JOIN = "LEFT JOIN memory_access a ON a.memory_id = m.id"

_MEMORY_FIELDS = tuple(f.name for f in fields(Memory))
if _MEMORY_FIELDS[:MEMORY_WIDTH] != MEMORY_NAMES:  # the mapping below is by position
    raise TypeError(f"Memory's first fields must be the read columns {MEMORY_NAMES}; got {_MEMORY_FIELDS}")
_DECODERS = tuple(c.decode for c in READ)

# The batch INSERT: one array parameter per written column, unnested together (``Writes.insert``).
INSERT = (
    f"INSERT INTO memories ({', '.join(c.name for c in WRITTEN)})"
    f" SELECT {', '.join(c.select or f'r.{c.name}' for c in WRITTEN)}"
    " FROM unnest("
    + ", ".join(f"%b::{c.written}[]" if c.written == "vector" else f"%s::{c.written}[]" for c in WRITTEN)
    + f") WITH ORDINALITY AS r({', '.join(c.name for c in WRITTEN)}, ord)"
    " ORDER BY r.ord"
    " ON CONFLICT (project, content_hash) DO NOTHING RETURNING id, project, content_hash"
)


def row_to_memory(r: dict[str, Any]) -> Memory:
    """A memory from a dict row holding MEMORY_COLUMNS (and the access statistics, if read)."""
    access = (r["access_count"], r["last_accessed_at"]) if "access_count" in r else None
    return values_to_memory([r.get(name) for name in MEMORY_NAMES], access)


def values_to_memory(v: Any, access: tuple[int | None, Any] | None = None) -> Memory:
    """A memory from MEMORY_COLUMNS' values in their order (a tuple row: the recall path reads a
    hundred rows a statement, and a dict per row cost as much as the mapping). ``access``: the
    access statistics read with it (``ACCESS_COLUMNS``), or None when they were not read."""
    return Memory(
        *[x if decode is None else decode(x) for decode, x in zip(_DECODERS, v, strict=False)],
        access_count=(access[0] or 0) if access is not None else 0,
        last_accessed_at=access[1] if access is not None else None,
        access_known=access is not None,
    )


def insert_params(rows: list[StoredRow]) -> list[list[Any]]:
    """The INSERT's parameters for ``rows``: one array per written column."""
    return [
        [r.values[c.name] if c.insert is None else c.insert(r.values[c.name]) for r in rows] for c in WRITTEN
    ]


def update_param(name: str, value: Any) -> Any:
    """A value as ``Store.update`` sets it."""
    encode = BY_NAME[name].update
    return value if encode is None else encode(value)


@dataclass(frozen=True, slots=True)
class StoredRow:
    """What to insert: a value for every written column (``WRITTEN``), and how the row joins its
    source's sequence and the automatic topics."""

    values: dict[str, Any]
    # Given no position: continue ``source``'s sequence (position = its last + 1, linked ``next``).
    # None: no sequence. ``sequence_gap_s``: only when the source's last memory was stored at most
    # this many seconds ago and happened at most this far from this one (else a gap: a new segment);
    # None: always (the caller named the source).
    sequence: bool = False
    sequence_gap_s: float | None = None
    # The automatic topics this row joins, with the key terms a topic gets if this row creates it:
    # their centroids take the row's embedding when the row is created (not for a duplicate).
    auto_topics: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # The vectors of a long memory's later parts (remember/passages.py), written with it when it is
    # created (not for a duplicate).
    passages: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.values.keys() != _WRITTEN_NAMES:
            raise ValueError(f"a stored row needs exactly the columns {sorted(_WRITTEN_NAMES)}")

    # What the store's own logic reads of a row (its key, its sequence, its topics' centroids).
    @property
    def project(self) -> str:
        return str(self.values["project"])

    @property
    def content_hash(self) -> str:
        return str(self.values["content_hash"])

    @property
    def source(self) -> str | None:
        source: str | None = self.values["source"]
        return source

    @property
    def position(self) -> int | None:
        position: int | None = self.values["position"]
        return position

    @property
    def occurred_at(self) -> datetime | None:
        occurred_at: datetime | None = self.values["occurred_at"]
        return occurred_at

    @property
    def embedding(self) -> list[float]:
        embedding: list[float] = self.values["embedding"]
        return embedding

    def at(self, position: int) -> StoredRow:
        """The same row at ``position`` of its source."""
        return replace(self, values={**self.values, "position": position})


_WRITTEN_NAMES = frozenset(c.name for c in WRITTEN)
