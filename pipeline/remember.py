"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

from typing import Any

from .config import EngineConfig
from .errors import EmbeddingFailed
from .inputs import MemoryInput
from .providers.embedder import embed_texts
from .records import Remembered
from .store import StoredRow


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Validate every item before anything is embedded or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def store_inputs(
    store, embedder, inputs: list[MemoryInput], *, timeout_s: float = 60.0
) -> list[Remembered]:
    """Embed (off the event loop, bounded by ``timeout_s``) and insert in one transaction; one
    result per input, in order. An embedder that fails or hangs stores nothing (EmbeddingFailed)."""
    try:
        vectors = await embed_texts(embedder, [m.content for m in inputs], timeout_s)
    except EmbeddingFailed as e:
        raise EmbeddingFailed(f"{e}; nothing was stored") from e
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
        Remembered(id=mid, status="created" if created else "duplicate", project=m.project)
        for m, (mid, created) in zip(inputs, results, strict=True)
    ]
