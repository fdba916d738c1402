"""``--from auto``: which format a path is, from its name and its first bytes, and what was found
when it is none of them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.importers import (
    READERS,
    chatgpt,
    claude,
    claude_code,
    markdown,
    mcp_memory_service,
    mem0,
    server_memory,
)
from memlane.pipeline.importers.records import jsonl_objects, peek

# The most specific first: a Claude Code session and a memlane export are both JSONL; a ChatGPT and
# a Claude export both have a conversations.json; any folder may hold a few notes.
_ORDER = (mcp_memory_service, claude_code, server_memory, chatgpt, claude, mem0, markdown)
_NAMES = {module: name for name, module in READERS.items()}


def memlane_jsonl(path: Path) -> str | None:
    """memlane's own export: JSONL, one memory object (with ``content``) a line."""
    if not path.is_file() or path.suffix not in (".jsonl", ".ndjson"):
        return None
    for _, obj in jsonl_objects(path):
        return (
            "memlane's JSONL export (one memory object a line)"
            if isinstance(obj, dict) and "content" in obj
            else None
        )
    return None


def detect(path: Path) -> tuple[str, str]:
    """(format, what was found); InvalidInput when the path is none of the formats."""
    if not path.exists():
        raise InvalidInput(f"{path} does not exist")
    for module in _ORDER:
        found = module.detect(path)
        if found:
            return _NAMES[module], found
    found = memlane_jsonl(path)
    if found:
        return "memlane", found
    raise InvalidInput(
        f"cannot tell which export {path} is: found {describe(path)}; name it with --from "
        f"({', '.join(['memlane', *READERS])})"
    )


def describe(path: Path) -> str:
    """What a path holds, in a few words (for errors)."""
    if path.is_dir():
        names = sorted(p.name for p in path.iterdir())
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        return f"a folder with {shown}" if names else "an empty folder"
    head = peek(path, 4096)
    if head.startswith("SQLite format 3"):
        try:
            with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        except sqlite3.Error:
            tables = []
        return f"a SQLite database with tables {', '.join(sorted(tables)) or '(none)'}"
    first = head.lstrip()[:1]
    if first in ("[", "{"):
        line = head.lstrip().split("\n", 1)[0]
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            return "a JSON document" + (" (a list)" if first == "[" else " (an object)")
        keys = ", ".join(sorted(obj)[:6]) if isinstance(obj, dict) else ""
        return f"JSON lines whose first has keys {keys}" if keys else "JSON"
    return f"a {path.suffix or 'extensionless'} file that is none of the formats"
