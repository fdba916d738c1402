"""Stage 4, retrieval: the vector (pgvector cosine) and keyword (PostgreSQL full text, OR-ed
lexemes) arms, for the question and every synthesised variant. Graph and temporal arms come later.
"""

from __future__ import annotations

import asyncio

from .records import Memory, Query, RecallRequest

ARMS = ("vector", "keyword")


async def retrieve(
    store, embedder, query: Query, req: RecallRequest, *, k: int, arms: tuple[str, ...] = ARMS
) -> dict[str, list[tuple[Memory, float]]]:
    """Returns one ranked list per (arm, query variant), named ``arm`` for the question itself and
    ``arm:N`` for variant N; RRF fuses them all."""
    texts = [query.text, *query.variants]
    embed_texts = texts + ([query.hypothetical] if query.hypothetical else [])
    vectors = await asyncio.to_thread(embedder.embed_batch, embed_texts) if "vector" in arms else []
    lists: dict[str, list[tuple[Memory, float]]] = {}
    for i, text in enumerate(texts):
        suffix = "" if i == 0 else f":{i}"
        found = await store.search(
            project=req.project,
            query=text,
            embedding=vectors[i] if vectors else None,
            k=k,
            category=req.category,
            tags=req.tags,
            arms=arms,
        )
        for arm, hits in found.items():
            lists[arm + suffix] = hits
    if query.hypothetical and vectors:
        found = await store.search(
            project=req.project,
            query="",
            embedding=vectors[-1],
            k=k,
            category=req.category,
            tags=req.tags,
            arms=("vector",),
        )
        lists["vector:hyde"] = found.get("vector", [])
    return lists
