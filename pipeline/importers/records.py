"""The records every reader yields, and the helpers the readers share (times, wrong-format errors)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dateutil import parser as dateparser

from memlane.pipeline.errors import InvalidInput


@dataclass(slots=True)
class Message:
    role: str  # "user", "assistant", "tool": the speaker ingest writes before the text
    text: str


@dataclass(slots=True)
class Conversation:
    """One chat: ingested with ``source`` ``<format>:<id>`` and ``occurred_at`` ``started``."""

    id: str
    messages: list[Message]
    started: datetime | None = None
    title: str | None = None


@dataclass(slots=True)
class Document:
    """A long text (a project document, a note longer than one memory): ingested as a document."""

    id: str
    text: str
    at: datetime | None = None


@dataclass(slots=True)
class Fact:
    """One memory for remember. ``id``: the original's id (or name), kept in the metadata as
    ``original_id`` where users see it; ``metadata``: the original's own, kept beside it."""

    content: str
    id: str
    occurred_at: datetime | None = None
    tags: tuple[str, ...] = ()
    category: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Skip:
    """Something in the export that is not imported, and why ("abandoned branch", "deleted")."""

    reason: str
    count: int = 1


Record = Conversation | Document | Fact | Skip


class WrongFormat(InvalidInput):
    """The path is not the format named: the message says what was expected and what was found."""

    def __init__(self, path: Path, fmt: str, expected: str, found: str) -> None:
        super().__init__(f"{path} is not a {fmt} export: expected {expected}; found {found}")


def when(value: Any) -> datetime | None:
    """An export's time: Unix seconds (ChatGPT, mcp-memory-service) or ISO 8601 text; None when
    absent or unreadable (a bad time loses the date, not the memory)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(float(value), UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        except ValueError:
            try:  # "2026-03-02 10:00", "March 2, 2026", "2 Mar 2026": notes' front matter
                dt = dateparser.parse(text)
            except (ValueError, OverflowError):
                return None
        return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)
    return None


def load_json(path: Path, fmt: str, expected: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise WrongFormat(path, fmt, expected, f"text that is not JSON ({e})") from None


def jsonl_objects(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value or None when the line is not JSON) for each non-blank line."""
    try:
        with path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError:
                    yield n, None
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{path} is not UTF-8 text ({e.reason})") from None


def shape(value: Any) -> str:
    """A short description of a parsed JSON value, for wrong-format errors."""
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:6])
        return f"a JSON object with keys {keys or '(none)'}"
    if isinstance(value, list):
        if not value:
            return "an empty JSON list"
        return f"a JSON list whose first item is {shape(value[0])}"
    return f"a JSON {type(value).__name__}"


def peek(path: Path, size: int = 65536) -> str:
    """The start of a file, for detection without parsing a large export whole."""
    try:
        with path.open("rb") as f:
            return f.read(size).decode("utf-8", "ignore")
    except OSError:
        return ""
