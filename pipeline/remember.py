"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

import asyncio
from typing import Any

from .config import EngineConfig
from .inputs import MemoryInput
from .records import Remembered
from .store import StoredRow


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Validate every item before anything is embedded or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def store_inputs(store, embedder, inputs: list[MemoryInput]) -> list[Remembered]:
    """Embed (off the event loop) and insert in one transaction; one result per input, in order."""
    vectors = await asyncio.to_thread(embedder.embed_passages, [m.content for m in inputs])
    rows = [
        StoredRow(
            project=m.project,
            content=m.content,
            content_hash=m.content_hash,
            embedding=vec,
            category=m.category,
            tags=m.tags,
            metadata=m.metadata,
            pinned=m.pinned,
            priority=m.priority,
            occurred_at=m.occurred_at,
            expires_at=m.expires_at,
            source=m.source,
        )
        for m, vec in zip(inputs, vectors, strict=True)
    ]
    results = await store.insert(rows, model_id=embedder.model_id)
    return [
        Remembered(id=mid, status="created" if created else "duplicate", project=m.project)
        for m, (mid, created) in zip(inputs, results, strict=True)
    ]
