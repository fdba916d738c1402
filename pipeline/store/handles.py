"""Short handles for memory ids: the shortest prefix that is unique in the store (at least 8 hex
digits), and resolving a prefix back to its memory.

Both are index lookups on the uuid primary key, never scans: a handle's length comes from the
id's two neighbours in key order, and a prefix is the key range from ``prefix000...`` to
``prefixfff...``. Handles are unique in the whole store, not only in the project a recall ran in,
because ``update`` and ``forget`` take no project.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from memlane.pipeline.errors import InvalidInput, NotFound
from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.connection import read_again_once
from memlane.pipeline.validate import parse_id_prefix

MIN_HANDLE_HEX = 8
# Whether no other memory's id starts with the same 8 hex digits as ``m.id``: its handle is then
# those 8 digits (``handles`` gives exactly that), so recall reads this beside each candidate's row
# (one probe of the key's index) and needs no handles statement of its own for such a memory.
HANDLE8_UNIQUE = (
    "NOT EXISTS (SELECT 1 FROM memories o WHERE o.id"
    " BETWEEN (left(m.id::text, 8) || '-0000-0000-0000-000000000000')::uuid"
    " AND (left(m.id::text, 8) || '-ffff-ffff-ffff-ffffffffffff')::uuid AND o.id <> m.id)"
)
# An ambiguous prefix lists this many candidates (the message must stay short).
MAX_LISTED = 5


def handle_of(memory_id: Any, hex_digits: int = MIN_HANDLE_HEX) -> str:
    """The prefix of the canonical id text that holds ``hex_digits`` hex digits (hyphens kept, so a
    handle is always the start of the full id)."""
    text = str(memory_id)
    seen = 0
    for i, ch in enumerate(text):
        if ch != "-":
            seen += 1
            if seen == hex_digits:
                return text[: i + 1]
    return text


def _common_hex(a: UUID, b: UUID | None) -> int:
    if b is None:
        return 0
    x, y = a.hex, b.hex
    n = 0
    while n < 32 and x[n] == y[n]:
        n += 1
    return n


class HandleQueries(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    @read_again_once
    async def handles(self, ids: list[UUID]) -> dict[UUID, str]:
        """Each id's handle: one more hex digit than it shares with its nearest neighbour in the
        store, and at least 8."""
        if not ids:
            return {}
        sql = (
            "SELECT x.id,"
            " (SELECT m.id FROM memories m WHERE m.id < x.id ORDER BY m.id DESC LIMIT 1) AS prev,"
            " (SELECT m.id FROM memories m WHERE m.id > x.id ORDER BY m.id LIMIT 1) AS next"
            " FROM unnest(%b::uuid[]) AS x(id)"
        )
        async with self._connection() as conn:
            cur = await conn.execute(sql, (list(ids),), binary=True)
            rows = await cur.fetchall()
        out: dict[UUID, str] = {}
        for mid, prev, nxt in rows:
            digits = max(MIN_HANDLE_HEX, _common_hex(mid, prev) + 1, _common_hex(mid, nxt) + 1)
            out[mid] = handle_of(mid, min(digits, 32))
        return out

    @read_again_once
    async def resolve_id(self, value: Any, projects: list[str] | None = None) -> UUID:
        """A full id as it is; a prefix of at least 8 hex digits to the one memory it starts.
        ``projects``: only memories of these projects exist for this caller (an access token's
        readable projects); a memory elsewhere gets exactly the error a missing id gets."""
        parsed = parse_id_prefix(value)
        scope, scope_params = ("", ()) if projects is None else (" AND project = ANY(%s)", (list(projects),))
        if isinstance(parsed, UUID):
            if projects is None:
                return parsed
            async with self._connection() as conn:
                cur = await conn.execute(
                    f"SELECT id FROM memories WHERE id = %s{scope}", (parsed, *scope_params)
                )
                if await cur.fetchone() is None:
                    raise NotFound(f"no memory has id {parsed}")  # the words of get/update/delete
            return parsed
        lo = UUID(parsed.ljust(32, "0"))
        hi = UUID(parsed.ljust(32, "f"))
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT id, project, content FROM memories WHERE id >= %s AND id <= %s{scope}"
                " ORDER BY id LIMIT %s",
                (lo, hi, *scope_params, MAX_LISTED + 1),
            )
            rows = await cur.fetchall()
        if not rows:
            raise NotFound(f"no memory id starts with {value!r}")
        if len(rows) > 1:
            listed = "; ".join(
                f"{mid} (project {project!r}): {_snippet(content)}"
                for mid, project, content in rows[:MAX_LISTED]
            )
            count = f"more than {MAX_LISTED}" if len(rows) > MAX_LISTED else str(len(rows))
            raise InvalidInput(
                f"id prefix {value!r} is ambiguous: {count} memories start with it: {listed}. "
                "Give more digits of the id."
            )
        found: UUID = rows[0][0]
        return found


def _snippet(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[: n - 1] + "…")
