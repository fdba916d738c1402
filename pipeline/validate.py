"""Input checks shared by every entry point (MCP tools, CLI, import). Each error says what is accepted."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from memlane.pipeline.errors import InvalidInput

_PROJECT_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
PRIORITY_MIN, PRIORITY_MAX, PRIORITY_DEFAULT = 1, 5, 3
# Nesting deeper than this is refused: Python's JSON encoder (and so every reader of the memory)
# runs out of stack near 1000 levels, and no real metadata comes near 100.
METADATA_MAX_DEPTH = 100
FACT_TYPES = ("world", "experience", "opinion", "instruction", "preference")
INSTRUCTION_TYPES = (
    "instruction",
    "preference",
)  # what recall adds where it applies  # remember/facttypes.py says what each means


def parse_datetime(value: Any, field: str) -> datetime | None:
    """ISO 8601 date or date-time; a value without a zone is taken as UTC."""
    if value is None:
        return None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            try:
                from dateutil.parser import isoparse

                dt = isoparse(text)
            except (ValueError, OverflowError):
                raise InvalidInput(
                    f"{field}: {value!r} is not an ISO 8601 date or date-time; "
                    "use e.g. '2024-05-08', '2024-05-08T13:56:00Z' or '2024-05-08T13:56:00+02:00'"
                ) from None
    else:
        raise InvalidInput(f"{field} must be an ISO 8601 string, not {type(value).__name__}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:  # an offset can push the first or last day of the calendar out of it ("0001-01-01T00:00+14:00")
        dt.astimezone(UTC)
    except OverflowError:
        raise InvalidInput(
            f"{field}: {value!r} is out of range; dates must fall within the years 1 to 9999 in UTC"
        ) from None
    return dt


def expiry(value: datetime | None, now: datetime) -> datetime | None:
    """A new ``expires_at``: later than ``now``. Recall ignores a memory from its expiry on, so one
    stored already expired could never be recalled, and purge would delete it unseen."""
    if value is not None and value <= now:
        raise InvalidInput(
            f"expires_at {value.isoformat()} is in the past: a memory that has expired is never "
            "recalled. Give a later date, or leave expires_at out for a memory that stays true"
        )
    return value


def parse_id(value: Any) -> UUID:
    if isinstance(value, UUID):
        return value
    try:
        return UUID(str(value).strip())
    except (ValueError, AttributeError):
        raise InvalidInput(
            f"id {value!r} is not a memory id; ids are UUIDs like '0190a3c4-5b6d-7e8f-9a0b-1c2d3e4f5a6b' "
            "as returned by remember and recall"
        ) from None


_HEX_RE = re.compile(r"^[0-9a-f]+$")
MIN_PREFIX_HEX = 8


def parse_id_prefix(value: Any) -> UUID | str:
    """A full id (any form ``uuid.UUID`` reads) or a handle: the first 8 or more hex digits of an id
    (hyphens optional), returned as lowercase hex without hyphens."""
    if isinstance(value, UUID):
        return value
    if not isinstance(value, str):
        raise InvalidInput(f"id must be a string, not {type(value).__name__}")
    text = value.strip().lower()
    digits = text.replace("-", "")
    if len(digits) == 32 and _HEX_RE.match(digits):
        return parse_id(text)
    if MIN_PREFIX_HEX <= len(digits) < 32 and _HEX_RE.match(digits):
        return digits
    try:  # the other spellings uuid.UUID reads ('{...}', 'urn:uuid:...')
        return UUID(text)
    except ValueError:
        pass
    raise InvalidInput(
        f"id {value!r} is not a memory id: give the id as recall returns it (at least its first "
        f"{MIN_PREFIX_HEX} hex digits, e.g. '0190a3c4') or the full UUID"
    )


def storable_text(text: str, field: str) -> str:
    """Text PostgreSQL can store and the tokenizers can read: no NUL character and valid Unicode
    (a lone surrogate, which JSON can carry, is neither UTF-8 nor text a model reads)."""
    if "\x00" in text:
        raise InvalidInput(f"{field} contains a NUL character, which cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput(
            f"{field} is not valid Unicode (a lone surrogate at character {e.start}); send UTF-8 text"
        ) from None
    return text


def project_name(value: Any, default: str) -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidInput(f"project must be a string, not {type(value).__name__}")
    name = value.strip()
    if not name:
        return default
    if not _PROJECT_RE.match(name):
        raise InvalidInput("project must be 1-200 characters without control characters")
    return storable_text(name, "project")


def content_text(value: Any, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"content must be a string, not {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidInput("content is empty: give the fact, preference or event to remember as text")
    storable_text(text, "content")
    if len(text) > max_chars:
        raise InvalidInput(
            f"content is {len(text)} characters; the maximum is {max_chars} "
            "(remember.max_content_chars). Split it into several memories, one fact each."
        )
    return text


def category_name(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"category must be a string, not {type(value).__name__}")
    name = value.strip().lower()
    if not name:
        return None
    if len(name) > 64 or not _PROJECT_RE.match(name):
        raise InvalidInput("category must be at most 64 characters without control characters")
    return storable_text(name, "category")


def tag_list(value: Any, max_tags: int) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise InvalidInput("tags must be a list of strings")
    out: list[str] = []
    for t in value:
        if not isinstance(t, str):
            raise InvalidInput(f"tags must be strings; got {type(t).__name__}")
        t = t.strip().lower()
        if not t:
            continue
        if len(t) > 64 or not _PROJECT_RE.match(t):
            raise InvalidInput(f"tag {t[:70]!r} is too long or has control characters (max 64 characters)")
        storable_text(t, "a tag")
        if t not in out:
            out.append(t)
    if len(out) > max_tags:
        raise InvalidInput(f"{len(out)} tags given; at most {max_tags} are accepted")
    return tuple(out)


def position_value(value: Any) -> int | None:
    """A memory's place in its source (0-based), or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**31 - 1:
        raise InvalidInput("position must be a whole number from 0 (its place in its source, e.g. a turn)")
    return value


def priority_value(value: Any) -> int:
    if value is None:
        return PRIORITY_DEFAULT
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"priority must be an integer from {PRIORITY_MIN} to {PRIORITY_MAX}")
    if not PRIORITY_MIN <= value <= PRIORITY_MAX:
        raise InvalidInput(
            f"priority {value} is out of range: use {PRIORITY_MIN} (low) to {PRIORITY_MAX} (critical), "
            f"default {PRIORITY_DEFAULT}"
        )
    return value


def metadata_object(value: Any, max_bytes: int) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"metadata must be a JSON object, not {type(value).__name__}")
    if _depth(value) > METADATA_MAX_DEPTH:
        raise InvalidInput(f"metadata is nested more than {METADATA_MAX_DEPTH} levels deep; flatten it")
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidInput(f"metadata is not valid JSON: {e}") from None
    if "\\u0000" in encoded:
        raise InvalidInput("metadata contains a NUL character, which cannot be stored")
    storable_text(encoded, "metadata")
    if len(encoded.encode()) > max_bytes:
        raise InvalidInput(f"metadata is larger than {max_bytes} bytes (remember.max_metadata_bytes)")
    return value


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value``, counted without recursion (so a hostile
    depth cannot exhaust the stack here)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list | tuple):
            deepest = max(deepest, depth)
            if depth > METADATA_MAX_DEPTH:
                break
            children = node.values() if isinstance(node, dict) else node
            stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return deepest


def content_hash(content: str, occurred_at: datetime | None) -> str:
    """Identity of a memory within a project: its words and when they happened."""
    stamp = occurred_at.astimezone(UTC).isoformat() if occurred_at else ""
    return hashlib.sha256(f"{content}\x00{stamp}".encode()).hexdigest()


def one_of(value: Any, field: str, choices: tuple[str, ...]) -> str:
    """A value that must be one of ``choices`` (recall's budget and mode, ingest's kind)."""
    if value not in choices:
        raise InvalidInput(f"{field} must be one of {', '.join(choices)}; got {value!r}")
    return str(value)


def fact_type_value(value: Any) -> str | None:
    """A caller's fact type, checked; None means "classify it"."""
    if value is None:
        return None
    if not isinstance(value, str) or value.strip().lower() not in FACT_TYPES:
        raise InvalidInput(f"fact_type must be one of {', '.join(FACT_TYPES)}; got {value!r}")
    return value.strip().lower()


def fact_types_filter(value: Any) -> tuple[str, ...]:
    """recall(fact_types=[...]): a list of fact types, each checked."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        raise InvalidInput(f"fact_types must be a list of {', '.join(FACT_TYPES)}")
    checked: list[str] = []
    for v in value:
        kind = fact_type_value(v)
        if kind is None:  # "classify it" for a memory's fact_type; in a filter it names nothing
            raise InvalidInput(f"fact_types must be a list of {', '.join(FACT_TYPES)}; got None in it")
        checked.append(kind)
    return tuple(dict.fromkeys(checked))


def topics_filter(value: Any) -> tuple[str, ...]:
    """recall(topics=[...]): topic names, as categories are written (trimmed, lower case)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(t, str) for t in value):
        raise InvalidInput("topics must be a list of topic names")
    out = [t.strip().lower() for t in value if t.strip()]
    if any(len(t) > 64 for t in out):
        raise InvalidInput("a topic name is at most 64 characters")
    return tuple(dict.fromkeys(out))
