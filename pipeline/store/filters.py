"""``Filters`` (``pipeline/request.py``) in SQL: the one WHERE clause of recall's statements and the
memory browser's pages. ``Filters.admits`` says the same in Python; a filter is added to both."""

from __future__ import annotations

from typing import Any

from memlane.pipeline.request import Filters
from memlane.pipeline.store.vectors import project_is

# "when": when it happened (occurred_at), or when it was stored when that is unknown; the same
# expression as the index memories_project_when, so the planner can use it.
WHEN = "coalesce(m.occurred_at, m.created_at)"
LIVE = "(m.expires_at IS NULL OR m.expires_at > now())"


def where(filters: Filters, *, live: bool = True) -> tuple[str, dict[str, Any]]:
    """The conditions on ``memories m`` and their named parameters, for the filters' one project
    (named in the text: its own vector index serves the vector arm, ``store/vectors.py``).
    ``live``: only memories that have not expired (recall); the browser shows every stored one."""
    conditions = [project_is("m.project", filters.project)]
    params: dict[str, Any] = {}
    if live:
        conditions.append(LIVE)
    if filters.category is not None:
        conditions.append("m.category = %(category)s")
        params["category"] = filters.category
    if filters.tags:
        conditions.append("m.tags @> %(tags)s")
        params["tags"] = list(filters.tags)
    if filters.topics:  # any of them (the GIN index on topics serves &&)
        conditions.append("m.topics && %(topics)s::text[]")
        params["topics"] = list(filters.topics)
    if filters.fact_types:
        conditions.append("m.fact_type = ANY(%(fact_types)s::text[])")
        params["fact_types"] = list(filters.fact_types)
    if filters.pinned is not None:
        conditions.append("m.pinned = %(pinned)s")
        params["pinned"] = filters.pinned
    if filters.since is not None:
        conditions.append(f"{WHEN} >= %(since)s")
        params["since"] = filters.since
    if filters.until is not None:
        conditions.append(f"{WHEN} < %(until)s")
        params["until"] = filters.until
    return " AND ".join(conditions), params
