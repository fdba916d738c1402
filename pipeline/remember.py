"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

import asyncio
from typing import Any

from .config import EngineConfig, GraphConfig
from .entities import extract
from .inputs import MemoryInput
from .records import Remembered
from .store import StoredRow
from .store.graph import LinkPlan, LinkSettings


def link_settings(cfg: GraphConfig) -> LinkSettings:
    return LinkSettings(
        relates_to_k=cfg.relates_to_k,
        relates_to_min_similarity=cfg.relates_to_min_similarity,
        same_time_k=cfg.same_time_k,
    )


def link_plan(cfg: GraphConfig, inputs: list[MemoryInput], *, chain: bool = True) -> LinkPlan:
    """The graph part of a write: each memory's entities, and whether the batch is one conversation
    (it shares a source, gives no positions and has more than one memory: remembered in order)."""
    sources = {m.source for m in inputs}
    conversation = (
        chain
        and len(inputs) > 1
        and len(sources) == 1
        and None not in sources
        and all(m.position is None for m in inputs)
    )
    return LinkPlan(
        settings=link_settings(cfg), entities=[extract(m.content) for m in inputs], chain=conversation
    )


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Validate every item before anything is embedded or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def store_inputs(
    store, embedder, inputs: list[MemoryInput], links: LinkPlan | None = None
) -> list[Remembered]:
    """Embed (off the event loop) and insert in one transaction, with the memories' entities and
    links when ``links`` is given; one result per input, in order."""
    vectors = await asyncio.to_thread(embedder.embed_batch, [m.content for m in inputs])
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
    results = await store.insert(rows, model_id=embedder.model_id, links=links)
    return [
        Remembered(id=mid, status="created" if created else "duplicate", project=m.project)
        for m, (mid, created) in zip(inputs, results, strict=True)
    ]
