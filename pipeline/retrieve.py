"""Stage 4, retrieval: the vector (pgvector cosine, HNSW) and keyword (BM25 over PostgreSQL full-text
lexemes, OR semantics) arms, for the question and every synthesised variant. Graph and temporal
arms come later.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from .records import Memory, Query, RecallRequest, stable_key

ARMS = ("vector", "keyword")


@dataclass(slots=True)
class Retrieved:
    """Ranked lists per arm and query variant (``vector``, ``keyword``, ``vector:1``...), plus every
    candidate's exact score on each active arm (the best over the query variants)."""

    lists: dict[str, list[tuple[Memory, float]]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # memory id -> arm -> score
    memories: dict[str, Memory] = field(default_factory=dict)
    arms: tuple[str, ...] = ARMS

    def add(self, suffix: str, hits) -> None:
        for arm in self.arms:
            ranked = sorted(
                (h for h in hits if arm in h.found_by), key=lambda h: (-h.scores[arm], *stable_key(h.memory))
            )
            if ranked:
                self.lists[arm + suffix] = [(h.memory, h.scores[arm]) for h in ranked]
        for h in hits:
            key = str(h.memory.id)
            self.memories[key] = h.memory
            best = self.scores.setdefault(key, {})
            for arm in self.arms:
                if arm in h.scores:
                    best[arm] = max(best.get(arm, float("-inf")), h.scores[arm])


async def retrieve(
    store,
    embedder,
    query: Query,
    req: RecallRequest,
    *,
    k: int,
    common_df: float = 0.05,
    arms: tuple[str, ...] = ARMS,
) -> Retrieved:
    texts = [query.text, *query.variants]
    embed_texts = texts + ([query.hypothetical] if query.hypothetical else [])
    filters = {
        "project": req.project,
        "k": k,
        "category": req.category,
        "tags": req.tags,
        "common_df": common_df,
    }
    keyword_ids: list = [None] * len(texts)
    vectors: list = []
    if "vector" in arms:
        # The keyword arm needs no embedding: run it while the query is embedded (CPU, in a thread),
        # so the slower of the two sets the pace instead of their sum.
        tasks = (
            [asyncio.ensure_future(store.keyword_candidates(query=t, **filters)) for t in texts]
            if "keyword" in arms
            else []
        )
        try:
            vectors = await asyncio.to_thread(embedder.embed_batch, embed_texts)
            if tasks:
                keyword_ids = list(await asyncio.gather(*tasks))
        finally:
            for t in tasks:
                t.cancel()
    out = Retrieved(arms=arms)
    for i, text in enumerate(texts):
        hits = await store.search(
            query=text,
            embedding=vectors[i] if vectors else None,
            arms=arms,
            keyword_ids=keyword_ids[i],
            **filters,
        )
        out.add("" if i == 0 else f":{i}", hits)
    if query.hypothetical and vectors:
        hits = await store.search(query="", embedding=vectors[-1], arms=("vector",), **filters)
        out.add(":hyde", hits)
    return out
