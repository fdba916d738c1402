"""``mem0``: what ``Memory.get_all()`` (or the platform's ``client.get_all()``) returns, saved as
JSON: ``{"results": [...]}`` (mem0 1.x), a bare list (0.x), or the platform's paginated page
``{"count", "next", "previous", "results": [...]}``. Each item: ``{"id", "memory", "hash",
"metadata", "categories", "created_at", "updated_at", "user_id", "agent_id", "run_id"}``.

The memory text, its categories (as tags), metadata and creation time are kept; the user, agent
and run ids go into the metadata; mem0's id is the original id.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memlane.pipeline.importers.records import Fact, Record, Skip, WrongFormat, load_json, peek, shape, when

EXPECTS = 'mem0 get_all output: {"results": [{"id", "memory", ...}]}, a list of them, or a paginated page'


def _items(data: Any) -> list[Any] | None:
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        return list(data["results"])
    if isinstance(data, list):
        return data
    return None


def detect(path: Path) -> str | None:
    if not path.is_file() or path.suffix != ".json":
        return None
    head = peek(path)
    if (
        '"memory"' in head
        and ('"results"' in head or head.lstrip().startswith("["))
        and '"mapping"' not in head
    ):
        return "mem0 get_all output (items with 'memory')"
    return None


def read(path: Path) -> Iterator[Record]:
    data = load_json(path, "mem0", EXPECTS)
    items = _items(data)
    if items is None or (items and not (isinstance(items[0], dict) and "memory" in items[0])):
        raise WrongFormat(path, "mem0", EXPECTS, shape(data))
    for m in items:
        if not isinstance(m, dict) or not isinstance(m.get("memory"), str) or not m["memory"].strip():
            yield Skip("item without memory text")
            continue
        meta = dict(m.get("metadata") or {}) if isinstance(m.get("metadata"), dict) else {}
        for key in ("user_id", "agent_id", "run_id"):
            if m.get(key):
                meta[key] = m[key]
        cats = m.get("categories") or []
        yield Fact(
            content=m["memory"].strip(),
            id=str(m.get("id") or m.get("hash") or ""),
            occurred_at=when(m.get("created_at")),
            tags=tuple(c for c in cats if isinstance(c, str)) if isinstance(cats, list) else (),
            metadata=meta,
        )
