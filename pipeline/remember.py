"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

import asyncio
from typing import Any

from . import facttypes
from .config import EngineConfig
from .inputs import MemoryInput
from .records import Remembered
from .store import StoredRow


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Validate every item before anything is embedded or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def store_inputs(store, embedder, inputs: list[MemoryInput], topics=None) -> list[Remembered]:
    """Embed (off the event loop) and insert in one transaction; one result per input, in order.
    ``topics`` (pipeline/topics.Topics, when ``[topics] enabled``) assigns topics and fact types:
    the first topic becomes the category when the caller gave none."""
    vectors = await asyncio.to_thread(embedder.embed_passages, [m.content for m in inputs])
    if topics is not None and topics.enabled:
        assigned = await topics.assign_batch(store, [(m.project, m.content) for m in inputs], vectors)
        inputs = [
            m.model_copy(
                update={
                    "category": m.category or (a.topics[0] if a.topics else None),
                    "fact_type": m.fact_type or facttypes.classify(m.content),
                }
            )
            for m, a in zip(inputs, assigned, strict=True)
        ]
    else:
        assigned = [None] * len(inputs)
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
            position=m.position,
            topics=a.topics if a is not None else None,
            fact_type=m.fact_type,
            auto_topics=a.auto if a is not None else (),
        )
        for m, vec, a in zip(inputs, vectors, assigned, strict=True)
    ]
    try:
        results = await store.insert(rows, model_id=embedder.model_id)
    except BaseException:
        if topics is not None:  # its cached centroids took this batch, which was not stored
            topics.forget_cache({m.project for m in inputs})
        raise
    return [
        Remembered(id=mid, status="created" if created else "duplicate", project=m.project)
        for m, (mid, created) in zip(inputs, results, strict=True)
    ]
