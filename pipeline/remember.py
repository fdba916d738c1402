"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from .config import EngineConfig
from .inputs import MemoryInput
from .records import Remembered
from .store import StoredRow


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Validate every item before anything is embedded or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def store_inputs(
    store, embedder, inputs: list[MemoryInput], *, similar: tuple[float, int] | None = None
) -> list[Remembered]:
    """Embed (off the event loop) and insert in one transaction; one result per input, in order.
    ``similar`` = (threshold, limit): also report, for each new memory, up to ``limit`` memories
    already stored in its project with a cosine similarity at or above ``threshold`` (one nearest-
    neighbour statement per project in the batch, before the insert)."""
    vectors = await asyncio.to_thread(embedder.embed_batch, [m.content for m in inputs])
    near: list[tuple[tuple[UUID, float], ...]] = [()] * len(inputs)
    if similar is not None and similar[1] > 0 and inputs:
        threshold, limit = similar
        by_project: dict[str, list[int]] = {}
        for i, m in enumerate(inputs):
            by_project.setdefault(m.project, []).append(i)
        for project, idx in by_project.items():
            found = await store.nearest_many(project, [vectors[i] for i in idx], limit)
            for i, hits in zip(idx, found, strict=True):
                near[i] = tuple((mid, round(sim, 4)) for mid, sim in hits if sim >= threshold)
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
        )
        for m, vec in zip(inputs, vectors, strict=True)
    ]
    results = await store.insert(rows, model_id=embedder.model_id)
    return [
        Remembered(
            id=mid,
            status="created" if created else "duplicate",
            project=m.project,
            # A duplicate is the stored memory itself: nothing new to compare.
            similar=tuple(s for s in hits if s[0] != mid) if created else (),
        )
        for m, (mid, created), hits in zip(inputs, results, near, strict=True)
    ]
