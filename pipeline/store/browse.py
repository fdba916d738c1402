"""Read queries of the memory browser (``server/ui``): one project's memories page by page, per
project summaries, and counts over time.

Pages use keyset pagination: the cursor is the last row's sort key, and the next page starts right
after it (``WHERE (key, id) < (...)``), so page 2000 costs what page 1 costs. Every sort has an
index that starts with (project, key) (migration 0004); an OFFSET would read and drop every row
before the page.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.rows import dict_row

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.records import Memory
from memlane.pipeline.request import Filters
from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.filters import WHEN, where
from memlane.pipeline.store.rows import M_MEMORY_COLUMNS, row_to_memory

# sort name -> the key columns, most significant first; the id breaks ties, so the order is total.
SORT_KEYS: dict[str, tuple[str, ...]] = {
    "created": ("m.created_at", "m.id"),
    "occurred": (WHEN, "m.id"),
    "priority": ("m.priority", "m.created_at", "m.id"),
}


@dataclass(frozen=True, slots=True)
class BrowsePage:
    memories: list[Memory]
    next_cursor: str | None  # None: this is the last page
    prev_cursor: str | None = None  # for ``before``: the page before this one; None on the first page


@dataclass(frozen=True, slots=True)
class ProjectSummary:
    project: str
    memories: int


def encode_cursor(values: list[Any]) -> str:
    data = [
        v.isoformat() if isinstance(v, datetime) else str(v) if isinstance(v, UUID) else v for v in values
    ]
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def decode_cursor(cursor: str, sort: str) -> list[Any]:
    """The sort key values a cursor carries, typed for the query; a cursor that was not made by
    ``encode_cursor`` for this sort is an ``InvalidInput``."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        kinds = {
            "created": (datetime, UUID),
            "occurred": (datetime, UUID),
            "priority": (int, datetime, UUID),
            "entities": (str,),
        }
        types = kinds[sort]
        if not isinstance(raw, list) or len(raw) != len(types):
            raise ValueError
        out: list[Any] = []
        for kind, value in zip(types, raw, strict=True):
            if kind is int:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ValueError
                out.append(value)
            elif kind is str:
                if not isinstance(value, str):
                    raise ValueError
                out.append(value)
            elif kind is datetime:
                out.append(datetime.fromisoformat(value))
            else:
                out.append(UUID(value))
        return out
    except (ValueError, TypeError, KeyError, json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidInput("cursor is not valid for this list: start again from the first page") from None


class BrowseQueries(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    async def browse(
        self,
        filters: Filters,
        *,
        sort: str = "created",
        descending: bool = True,
        cursor: str | None = None,
        before: str | None = None,
        limit: int = 50,
        current_only: bool = False,
        uncategorized: bool = False,
    ) -> BrowsePage:
        """One page of the memories of the filters' project that they admit (expired ones too: the
        browser shows what is stored), with their access counts; ``current_only``: without the
        memories a newer one superseded (migration 0013); ``uncategorized``: only the memories without
        a category (``Filters.category`` names one category; no category name can mean "none"; the
        browser refuses both at once)."""
        if sort not in SORT_KEYS:
            raise InvalidInput(f"sort must be one of {', '.join(SORT_KEYS)}; got {sort!r}")
        keys = SORT_KEYS[sort]
        condition, params = where(filters, live=False)
        conditions = [condition]
        if current_only:
            conditions.append("m.superseded_by IS NULL")
        if uncategorized:
            conditions.append("m.category IS NULL")
        if cursor is not None and before is not None:
            raise InvalidInput("give cursor (the next page) or before (the previous page), not both")
        # ``before``: the page that ends just before a row, read backwards from it (the same index,
        # scanned the other way) and then put back in order.
        backward = before is not None
        mark = cursor if cursor is not None else before
        if mark is not None:
            # A row comparison in the sort's direction: every key sorts the same way, so one
            # comparison of tuples is exactly "after the cursor", and it matches the index order.
            values = decode_cursor(mark, sort)
            op = "<" if descending != backward else ">"
            conditions.append(
                f"({', '.join(keys)}) {op} ({', '.join(f'%(k{i})s' for i in range(len(keys)))})"
            )
            params.update({f"k{i}": value for i, value in enumerate(values)})
        direction = "DESC" if descending != backward else "ASC"
        order = ", ".join(f"{k} {direction}" for k in keys)
        cols = M_MEMORY_COLUMNS
        key_cols = ", ".join(f"{k} AS k{i}" for i, k in enumerate(keys))
        sql = (
            f"SELECT p.*, a.access_count, a.last_accessed_at FROM ("
            f" SELECT {cols}, {key_cols} FROM memories m WHERE {' AND '.join(conditions)}"
            f" ORDER BY {order} LIMIT %(limit)s) AS p"
            f" LEFT JOIN memory_access a ON a.memory_id = p.id"
            f" ORDER BY {', '.join(f'k{i} {direction}' for i in range(len(keys)))}"
        )
        params["limit"] = limit + 1  # one more than asked: whether there is a next page
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params)
            rows = await cur.fetchall()
        more = len(rows) > limit  # backward: more rows before this page
        rows = rows[:limit]
        if backward:
            rows.reverse()

        def key(row: dict[str, Any]) -> str:
            return encode_cursor([row[f"k{i}"] for i in range(len(keys))])

        if not rows:
            return BrowsePage(memories=[], next_cursor=None)
        has_next = True if backward else more
        has_prev = more if backward else cursor is not None
        return BrowsePage(
            memories=[row_to_memory(r) for r in rows],
            next_cursor=key(rows[-1]) if has_next else None,
            prev_cursor=key(rows[0]) if has_prev else None,
        )

    async def project_summaries(self) -> list[ProjectSummary]:
        """Every project and its memory count. Read from memlane_projects, which the BM25 statistics
        triggers keep exact (migration 0002), rather than counting the memories table."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT project, docs FROM memlane_projects WHERE docs > 0 ORDER BY project"
            )
            return [ProjectSummary(project=p, memories=int(n)) for p, n in await cur.fetchall()]

    async def project_size(self, project: str) -> int:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT docs FROM memlane_projects WHERE project = %s", (project,))
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def project_categories(self, project: str) -> list[tuple[str | None, int]]:
        """(category, memories) of one project, largest first; None is "no category"."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT category, count(*) FROM memories WHERE project = %s"
                " GROUP BY category ORDER BY count(*) DESC, category NULLS LAST",
                (project,),
            )
            return [(c, int(n)) for c, n in await cur.fetchall()]

    async def project_topics(
        self, project: str, fixed: list[str] | tuple[str, ...] = ()
    ) -> list[tuple[str, int, list[str], str | None]]:
        """(topic, memories, key terms, summary) of a project's topics, largest first. An automatic
        topic's count is ``memlane_topics.members`` (kept by the write path, no scan); a fixed topic
        (configured, not stored) is counted through the topics GIN index. The summary is the
        category summary of the same name (a memory's first topic became its category)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "WITH t(name, members, key_terms) AS ("
                " SELECT name, members, key_terms FROM memlane_topics WHERE project = %(p)s AND members > 0"
                " UNION ALL SELECT f.name, (SELECT count(*) FROM memories m"
                "  WHERE m.project = %(p)s AND m.topics @> ARRAY[f.name]), '{}'::text[]"
                "  FROM unnest(%(f)s::text[]) AS f(name)"
                "  WHERE NOT EXISTS (SELECT 1 FROM memlane_topics a WHERE a.project = %(p)s AND a.name = f.name))"
                " SELECT t.name, t.members, t.key_terms, s.summary FROM t"
                " LEFT JOIN category_summaries s ON s.project = %(p)s AND s.category = t.name"
                " WHERE t.members > 0 ORDER BY t.members DESC, t.name",
                {"p": project, "f": list(fixed)},
            )
            return [(n, int(c), list(k), s) for n, c, k, s in await cur.fetchall()]

    async def category_names(self, project: str) -> list[str]:
        """The distinct categories of one project, for a filter menu, without reading every row:
        a skip scan (each step asks the (project, category) index for the next larger category),
        so a few categories in 100k memories cost a few index probes."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "WITH RECURSIVE c(category) AS ("
                " SELECT min(category) FROM memories WHERE project = %(p)s"
                " UNION ALL"
                " SELECT (SELECT min(m.category) FROM memories m WHERE m.project = %(p)s AND m.category > c.category)"
                " FROM c WHERE c.category IS NOT NULL)"
                " SELECT category FROM c WHERE category IS NOT NULL",
                {"p": project},
            )
            return [r[0] for r in await cur.fetchall()]

    async def most_recalled(self, project: str, limit: int = 5) -> list[Memory]:
        """The memories recalls returned most often (memory_access holds only recalled memories)."""
        cols = M_MEMORY_COLUMNS
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(
                f"SELECT {cols}, a.access_count, a.last_accessed_at FROM memory_access a"
                " JOIN memories m ON m.id = a.memory_id WHERE m.project = %s AND a.access_count > 0"
                " ORDER BY a.access_count DESC, a.last_accessed_at DESC NULLS LAST, m.id LIMIT %s",
                (project, limit),
            )
            return [row_to_memory(r) for r in await cur.fetchall()]

    async def created_per_day(self, project: str | None = None) -> list[tuple[datetime, int]]:
        """(day, memories stored that day), oldest first, for the stats page. One pass over the
        table; the stats page is opened now and then, not on every list page."""
        where, params = ("WHERE project = %s", (project,)) if project is not None else ("", ())
        async with self._connection() as conn:
            cur = await conn.execute(
                f"SELECT date_trunc('day', created_at) AS d, count(*) FROM memories {where}"
                " GROUP BY d ORDER BY d",
                params,
            )
            return [(d, int(n)) for d, n in await cur.fetchall()]
