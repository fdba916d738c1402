"""Reading the browser's query parameters and forms: each error says what is accepted."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from memlane.pipeline.records import Memory
from memlane.pipeline.request import Parameter, Request


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


@dataclass(frozen=True, slots=True)
class FormField:
    """One input of a form made from a request value's parameter (``request_form``)."""

    name: str
    label: str
    description: str
    kind: str  # "text", "number", "checkbox", "select" or "yesno"
    value: Any  # what was given: a string, a bool, or (a multiple select) the chosen values
    placeholder: str = ""  # the engine's default, shown where nothing was given
    choices: tuple[str, ...] = ()
    multiple: bool = False
    required: bool = False


def request_form(
    request: type[Request], given: Mapping[str, str], multi: Callable[[str], list[str]], defaults: Request
) -> tuple[list[FormField], dict[str, Any]]:
    """The inputs of ``request``'s browser form (``Request.parameters("ui")``), showing what
    ``given`` (the query string; ``multi`` reads a repeated parameter) holds, and the request's
    fields from it, for ``parse``: the request value checks them, so the page says what the tool
    would. What was not given is left out (the engine's default); ``defaults``, the request parsed
    with nothing optional given, says what that default is."""
    fields: list[FormField] = []
    data: dict[str, Any] = {}
    for p in request.parameters("ui"):
        label = p.name.replace("_", " ").capitalize()
        shown = _shown(p, defaults.value_of(p.name))
        if p.many and p.choices:
            chosen = [c for c in multi(p.name) if c]
            fields.append(
                FormField(p.name, label, p.description, "select", chosen, choices=p.choices, multiple=True)
            )
            if chosen:
                data[p.name] = chosen
            continue
        text = (given.get(p.name) or "").strip()
        if p.wire is bool:
            on = text.lower() in ("on", "true", "1", "yes")
            fields.append(FormField(p.name, label, p.description, "checkbox", on))
            if on:
                data[p.name] = True
            continue
        if p.takes(bool):
            fields.append(FormField(p.name, label, p.description, "yesno", text, choices=("true", "false")))
            if text:
                data[p.name] = {"true": True, "false": False}.get(text.lower(), text)
            continue
        if p.choices:
            value = text or (p.default if isinstance(p.default, str) else "")
            # A default the engine decides (None to the caller) is an option of its own.
            blank = shown if p.default is None else ""
            fields.append(
                FormField(p.name, label, p.description, "select", value, placeholder=blank, choices=p.choices)
            )
        else:
            kind = "number" if p.takes(int) else "text"
            fields.append(
                FormField(p.name, label, p.description, kind, text, placeholder=shown, required=p.required)
            )
        if text:
            data[p.name] = _value(p, text)
    return fields, data


def _value(p: Parameter, text: str) -> Any:
    """A query string's text as the parameter's type; a number that is none is handed on as
    given, for the request value to refuse in its words."""
    if p.takes(int):
        try:
            return int(text)
        except ValueError:
            return text
    if p.many:
        items = [t.strip() for t in text.split(",") if t.strip()]
        return items[0] if len(items) == 1 and p.takes(str) else items
    return text


def _shown(p: Parameter, value: Any) -> str:
    """What an empty input means, as its placeholder: the engine's default, or what to type."""
    if p.required:
        return p.description
    if p.is_date:
        return "ISO 8601"
    if value is None or isinstance(value, bool) or value == ():
        return "a, b" if p.many else ""
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return str(value)
