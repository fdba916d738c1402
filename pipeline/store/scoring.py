"""Reads for the scoring adjustments (stage 8, ``pipeline/adjust.py``): access statistics of the
candidates and category centroids. Both are one statement each, for the candidates only."""

from __future__ import annotations

import time
from datetime import datetime
from uuid import UUID

import numpy as np

# A category's centroid is the mean of at most this many of its memories (the first the (project,
# category) index gives): a recall asks for a dozen categories, and averaging every member read
# whole categories, ~28 ms per recall at 100k memories. 64 unit vectors fix the mean's direction to
# within a few degrees of the whole category's.
CENTROID_SAMPLE = 64


class ScoringQueries:
    async def access_stats(self, ids: list[UUID]) -> dict[UUID, tuple[int, datetime | None]]:
        """(access_count, last_accessed_at) of the memories that have any; the others were never
        returned by a recall."""
        if not ids:
            return {}
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT memory_id, access_count, last_accessed_at FROM memory_access WHERE memory_id = ANY(%s)",
                (list(ids),),
            )
            return {mid: (int(n), last) for mid, n, last in await cur.fetchall()}

    async def category_centroids(
        self, pairs: list[tuple[str, str]], *, max_age_s: float = 0.0
    ) -> dict[tuple[str, str], np.ndarray]:
        """The mean embedding (pgvector ``avg``) of each (project, category), over at most
        ``CENTROID_SAMPLE`` of its memories, normalised to unit length; pairs without an embedded
        memory are left out. The (project, category) index keeps this to the categories' own rows. Centroids younger than ``max_age_s`` come from this
        store's process-wide cache (a category's mean moves little with one more memory)."""
        cache: dict = self.__dict__.setdefault("_centroids", {})
        now = time.monotonic()
        out: dict[tuple[str, str], np.ndarray] = {}
        wanted = []
        for pair in dict.fromkeys(pairs):
            hit = cache.get(pair)
            if hit is not None and now - hit[0] <= max_age_s:
                if hit[1] is not None:
                    out[pair] = hit[1]
            else:
                wanted.append(pair)
        if not wanted:
            return out
        projects = [p for p, _ in wanted]
        categories = [c for _, c in wanted]
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT w.project, w.category, avg(s.embedding) FROM unnest(%s::text[], %s::text[])"
                " AS w(project, category) CROSS JOIN LATERAL (SELECT m.embedding FROM memories m"
                "   WHERE m.project = w.project AND m.category = w.category AND m.embedding IS NOT NULL"
                "   LIMIT %s) s GROUP BY w.project, w.category",
                (projects, categories, CENTROID_SAMPLE),
            )
            rows = await cur.fetchall()
        found = {}
        for project, category, mean in rows:
            vec = np.asarray(mean.to_numpy() if hasattr(mean, "to_numpy") else mean, dtype=np.float32)
            norm = float(np.linalg.norm(vec))
            found[(project, category)] = vec / norm if norm > 0 else None
        if len(cache) > 4096:  # bounded: drop everything rather than track an LRU for a 60 s cache
            cache.clear()
        for pair in wanted:
            cache[pair] = (now, found.get(pair))
            if found.get(pair) is not None:
                out[pair] = found[pair]
        return out
