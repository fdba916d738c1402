"""Reading the browser's query parameters and forms: each error says what is accepted."""

from __future__ import annotations

import json
from typing import Any

from memlane.pipeline.records import Memory


class BadRequest(Exception):
    """A query parameter or form field the page cannot use; the message says what is accepted."""


def whole_number(value: str | None, name: str, default: int, lo: int, hi: int) -> int:
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number from {lo} to {hi}; got {value!r}") from None
    if not lo <= n <= hi:
        raise BadRequest(f"{name} must be from {lo} to {hi}; got {n}")
    return n


def choice(value: str | None, name: str, choices: tuple[str, ...] | list[str], default: str) -> str:
    if value is None or value == "":
        return default
    if value not in choices:
        raise BadRequest(f"{name} must be one of {', '.join(choices)}; got {value!r}")
    return value


def edit_changes(m: Memory, form: dict[str, Any]) -> dict[str, Any]:
    """The fields the edit form changes, for ``Engine.update``. The form posts every field; only
    those that differ from the memory are sent, so unchanged content is not embedded again. An
    emptied category or date is "unchanged": update cannot remove them (nor can the MCP tool)."""
    changes: dict[str, Any] = {}
    content = str(form.get("content", "")).strip()
    if content and content != m.content:
        changes["content"] = content
    category = str(form.get("category", "")).strip().lower()
    if category and category != m.category:
        changes["category"] = category
    tags = [t.strip().lower() for t in str(form.get("tags", "")).split(",") if t.strip()]
    if tags != list(m.tags):
        changes["tags"] = tags
    if "priority" in form:
        priority = whole_number(str(form["priority"]), "priority", m.priority, 1, 5)
        if priority != m.priority:
            changes["priority"] = priority
    pinned = form.get("pinned") == "on"
    if pinned != m.pinned:
        changes["pinned"] = pinned
    for field in ("occurred_at", "expires_at"):
        text = str(form.get(field, "")).strip()
        current = getattr(m, field)
        if text and text != (current.isoformat() if current else ""):
            changes[field] = text
    meta_text = str(form.get("metadata", "")).strip() or "{}"
    try:
        metadata = json.loads(meta_text)
    except json.JSONDecodeError as e:
        raise BadRequest(f"metadata is not valid JSON ({e}); nothing was changed") from None
    if metadata != m.metadata:
        changes["metadata"] = metadata
    return changes
