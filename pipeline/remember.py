"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, fields
from typing import Any

from . import validate as v
from .config import EngineConfig
from .errors import InvalidInput
from .store import StoredRow

FIELDS = (
    "content",
    "project",
    "category",
    "tags",
    "pinned",
    "priority",
    "occurred_at",
    "expires_at",
    "metadata",
    "source",
)


@dataclass(frozen=True, slots=True)
class Draft:
    """A validated memory, not yet embedded."""

    project: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    pinned: bool
    priority: int
    occurred_at: Any
    expires_at: Any
    source: str | None


def draft(cfg: EngineConfig, item: dict[str, Any]) -> Draft:
    unknown = sorted(set(item) - set(FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(unknown)}; accepted: {', '.join(FIELDS)}")
    pinned = item.get("pinned", False)
    if not isinstance(pinned, bool):
        raise InvalidInput("pinned must be true or false")
    source = item.get("source")
    if source is not None and not isinstance(source, str):
        raise InvalidInput("source must be a string")
    occurred_at = v.parse_datetime(item.get("occurred_at"), "occurred_at")
    expires_at = v.parse_datetime(item.get("expires_at"), "expires_at")
    return Draft(
        project=v.project_name(item.get("project"), cfg.default_project),
        content=v.content_text(item.get("content"), cfg.remember.max_content_chars),
        category=v.category_name(item.get("category")),
        tags=v.tag_list(item.get("tags"), cfg.remember.max_tags),
        metadata=v.metadata_object(item.get("metadata"), cfg.remember.max_metadata_bytes),
        pinned=pinned,
        priority=v.priority_value(item.get("priority")),
        occurred_at=occurred_at,
        expires_at=expires_at,
        source=source,
    )


async def store_drafts(store, embedder, drafts: list[Draft]) -> list[tuple[Any, bool]]:
    """Embed (off the event loop) and insert in one transaction; returns (id, created) per draft."""
    vectors = await asyncio.to_thread(embedder.embed_batch, [d.content for d in drafts])
    rows = [
        StoredRow(
            **{f.name: getattr(d, f.name) for f in fields(d)},
            content_hash=v.content_hash(d.content, d.occurred_at),
            embedding=vec,
        )
        for d, vec in zip(drafts, vectors, strict=True)
    ]
    return await store.insert(rows)
