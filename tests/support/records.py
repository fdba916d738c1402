"""Records for the pure stages' tests (no database)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memlane.pipeline.records import Memory


def make_memory(content: str, **fields) -> Memory:
    """A Memory record with defaults for every field not given."""
    now = fields.pop("created_at", None) or datetime.now(UTC)
    base = {
        "id": uuid.uuid4(),
        "project": "p",
        "content": content,
        "category": None,
        "tags": (),
        "metadata": {},
        "pinned": False,
        "priority": 3,
        "occurred_at": None,
        "created_at": now,
        "updated_at": now,
        "expires_at": None,
        "source": None,
    }
    base.update(fields)
    return Memory(**base)
