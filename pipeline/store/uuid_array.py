"""Lists of memory ids as one ``uuid[]`` parameter, encoded whole.

psycopg dumps a list element by element in Python (finding the elements' type, then one dumper
call and one struct pack per id): about 10 us per id, and a recall sends a hundred ids in its
graph hops, its scoring statements and its handles. ``UuidArray`` is written in PostgreSQL's
binary array format in one join instead. A statement takes it as ``%(name)b::uuid[]``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from uuid import UUID

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

UUID_OID = 2950
UUID_ARRAY_OID = 2951
# The binary array header: dimensions, has-nulls flag, element type, then each dimension's length
# and lower bound; each element is its length (16) and its 16 bytes.
_HEADER = struct.Struct("!iiIii")
_EMPTY = struct.pack("!iiI", 0, 0, UUID_OID)
_LENGTH = struct.pack("!i", 16)


class UuidArray:
    """Memory ids (``UUID``) sent as one binary ``uuid[]``; none may be None."""

    __slots__ = ("ids",)

    def __init__(self, ids: Iterable[UUID]) -> None:
        self.ids = ids if isinstance(ids, list | tuple) else list(ids)

    def __len__(self) -> int:
        return len(self.ids)


class UuidArrayDumper(Dumper):
    format = Format.BINARY
    oid = UUID_ARRAY_OID

    def dump(self, obj: UuidArray) -> bytes:
        ids = obj.ids
        if not ids:
            return _EMPTY
        return _HEADER.pack(1, 0, UUID_OID, len(ids), 1) + b"".join([_LENGTH + u.bytes for u in ids])


# The default adapters map: every connection made from now on (the pools', the replicas') has it.
psycopg.adapters.register_dumper(UuidArray, UuidArrayDumper)
