"""What the client's model reads from recall: one compact structure, shared by the MCP tool and the
CLI's ``--json``, so the token budget counts exactly what is delivered.

Per memory: its handle (``id``, the shortest prefix of its id that is unique in the store, at least
8 hex digits), its content, a date, and only the fields that carry information. With
``explain=true`` the id is the full UUID and the final score is added, with the scoring
adjustments' factors (``adjustments: {"decay": 0.93, "priority": 1.25, ...}``) that made it. The
text block of the tool result is :func:`to_text` of the same structure, so both blocks cost the same tokens. Compact
because it is all the client's context pays for: a pretty-printed block with every field cost
many times ``max_tokens``.
"""

from __future__ import annotations

import json
from datetime import UTC, timedelta
from typing import Any

from memlane.pipeline.records import Memory
from memlane.pipeline.store.handles import handle_of as handle_of  # made by the store, shown here
from memlane.pipeline.validate import INSTRUCTION_TYPES, PRIORITY_DEFAULT


def memory_date(m: Memory) -> str:
    """When it happened if known, else when it was stored; a date is all a reader needs."""
    when = m.occurred_at or m.created_at
    return when.astimezone(UTC).date().isoformat()


def event_of(m: Memory) -> str | None:
    """The time its content names (``event_start``), when another day than its date: a day, or a
    span "first..last" (days, inclusive)."""
    if m.event_start is None or m.event_end is None:
        return None
    first = m.event_start.astimezone(UTC).date()
    last = (m.event_end.astimezone(UTC) - timedelta(microseconds=1)).date()
    if first == last:
        return None if first.isoformat() == memory_date(m) else first.isoformat()
    return f"{first.isoformat()}..{last.isoformat()}"


def memory_view(
    m: Memory,
    handle: str | None = None,
    *,
    score: float | None = None,
    show_project: bool = False,
    explain: bool = False,
    adjustments: dict[str, float] | None = None,
) -> dict[str, Any]:
    """One memory as the model reads it. Absent, empty and default fields are left out."""
    out: dict[str, Any] = {
        "id": str(m.id) if explain or handle is None else handle,
        "content": m.content,
        "date": memory_date(m),
    }
    if (event := event_of(m)) is not None:
        out["event"] = event
    if m.category:
        out["category"] = m.category
    if m.tags:
        out["tags"] = list(m.tags)
    if m.topics and list(m.topics) != [m.category]:  # the first topic is usually the category
        out["topics"] = list(m.topics)
    if m.fact_type and m.fact_type != "world":  # world is the common case, like priority 3
        out["fact_type"] = m.fact_type
    if m.fact_type in INSTRUCTION_TYPES:  # how the user wants things done: follow it, not answer with it
        out["kind"] = "instruction"
    if m.pinned:
        out["pinned"] = True
    if m.priority != PRIORITY_DEFAULT:
        out["priority"] = m.priority
    if show_project:
        out["project"] = m.project
    if m.metadata:
        out["metadata"] = m.metadata
    if m.conflicts_with:
        out["conflict"] = [str(c) if explain else handle_of(c) for c in m.conflicts_with]
    if m.superseded_by is not None:
        out["superseded_by"] = str(m.superseded_by) if explain else handle_of(m.superseded_by)
        if m.valid_until is not None:
            out["valid_until"] = m.valid_until.astimezone(UTC).date().isoformat()
    if explain and score is not None:
        out["score"] = round(score, 4)
    if explain and adjustments:  # stage 8's factors on the score (pipeline/recall/adjust.py)
        out["adjustments"] = {k: round(v, 4) for k, v in adjustments.items()}
    return out


def envelope(
    memories: list[dict[str, Any]],
    tokens_used: int,
    note: str | None = None,
    entities: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"memories": memories, "tokens_used": tokens_used}
    if entities:
        out["entities"] = entities  # include_entities: [{name, facts: [...]}]
    if note:
        out["note"] = note
    return out


def to_text(obj: Any) -> str:
    """Compact JSON: no indentation, no spaces after separators, UTF-8 kept as is (``\\uXXXX``
    escapes would cost several tokens per character)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
