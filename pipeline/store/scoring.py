"""Reads for the scoring adjustments (stage 8, ``pipeline/recall/adjust.py``): access statistics of the
candidates and category centroids, one statement each for the candidates; a centroid cache miss
also fills the cache with the project's other categories in the background."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime
from uuid import UUID

import numpy as np
import numpy.typing as npt

from memlane.pipeline.store.base import StorePart
from memlane.pipeline.store.connection import read_again_once

# A category's centroid is the mean of at most this many of its memories (the first the (project,
# category) index gives): a recall asks for a dozen categories, and averaging every member would
# read whole categories; 64 unit vectors fix the mean's direction to within a few degrees.
CENTROID_SAMPLE = 64
# A project with more categories has only the asked ones read on a miss; below the number a large
# project has, every recall would read its own misses.
PROJECT_CATEGORIES = 256

log = logging.getLogger(__name__)

Centroid = npt.NDArray[np.float32]
# A cached centroid: (monotonic time read, its category's version, the unit centroid or None).
_Cached = tuple[float, str, Centroid | None]


class ScoringQueries(StorePart):
    @read_again_once
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

    @read_again_once
    async def category_centroids(
        self,
        pairs: list[tuple[str, str]],
        *,
        max_age_s: float = 0.0,
        versions: dict[tuple[str, str], str] | None = None,
    ) -> dict[tuple[str, str], Centroid]:
        """The mean embedding (pgvector ``avg``) of each (project, category), over at most
        ``CENTROID_SAMPLE`` of its memories, normalised to unit length; pairs without an embedded
        memory are left out. The (project, category) index keeps this to the categories' own rows.

        With ``max_age_s`` > 0 centroids come from a process-wide cache, for at most that long and
        only while the category is unchanged in the database: the statement that reads them
        compares each cached centroid's version (its ``category_summaries`` row, which the triggers
        of migration 0007 change with every write to the category) and averages only the changed
        or uncached ones. So servers sharing a database weigh categories alike, whatever each has
        cached. A miss also starts, in the background, the read of the project's other categories
        (for a project of at most ``PROJECT_CATEGORIES``): the next recalls in that project, which
        ask for other categories of it, find them cached. A recall's dozen categories were most of
        stage 8's time; a whole project's take several times that, which no recall waits for.

        ``versions``: categories' versions (``CATEGORY_VERSION``) read by a statement of the caller
        (recall's rows carry theirs); a fresh cached centroid of the version given is taken without
        a statement, which is then sent only for the others, if any."""
        cache = self._centroid_cache()
        now = time.monotonic()
        wanted = list(dict.fromkeys(pairs))
        have: dict[tuple[str, str], _Cached] = {}
        if max_age_s > 0:
            have = {pair: cache[pair] for pair in wanted if _fresh(cache.get(pair), now, max_age_s)}
        versions = versions or {}
        found = {pair: hit[2] for pair, hit in have.items() if versions.get(pair) == hit[1]}
        rest = [pair for pair in wanted if pair not in found]
        if rest:
            found.update(await self._read_centroids(rest, now, have))
        if max_age_s > 0:
            for project in sorted({pair[0] for pair in wanted if pair not in have}):
                self._fill_centroids(project, max_age_s)
        return {pair: vec for pair, vec in found.items() if vec is not None}

    async def _read_centroids(
        self, pairs: list[tuple[str, str]], now: float, have: dict[tuple[str, str], _Cached] | None = None
    ) -> dict[tuple[str, str], Centroid | None]:
        """Each pair's centroid: ``have``'s cached one while its version is current, else read."""
        have = have or {}
        async with self._connection() as conn:
            cur = await conn.execute(
                _CENTROIDS_SQL,
                {
                    "p": [p for p, _ in pairs],
                    "c": [c for _, c in pairs],
                    "have": [have[pair][1] if pair in have else None for pair in pairs],
                    "n": CENTROID_SAMPLE,
                },
                binary=True,
            )
            rows = await cur.fetchall()
        found: dict[tuple[str, str], Centroid | None] = {}
        cache = self._centroid_cache()
        if len(cache) > 4096:  # bounded: drop everything rather than track an LRU for a 60 s cache
            cache.clear()
        for project, category, version, read, mean in rows:
            pair = (project, category)
            if not read:
                found[pair] = have[pair][2]
                continue
            vec = None
            if mean is not None:
                vec = np.asarray(mean.to_numpy() if hasattr(mean, "to_numpy") else mean, dtype=np.float32)
                norm = float(np.linalg.norm(vec))
                vec = vec / norm if norm > 0 else None
            found[pair] = vec
            cache[pair] = (now, version, vec)
        return found

    def _fill_centroids(self, project: str, max_age_s: float) -> None:
        """Read, in the background, the centroids of the project's categories not cached (one fill
        per project at a time; a failure only leaves them uncached)."""
        filling: dict[str, asyncio.Future[None]] = self.__dict__.setdefault("_filling", {})
        if project in filling:
            return

        async def fill() -> None:
            try:
                async with self._connection() as conn:
                    cur = await conn.execute(
                        _PROJECT_CATEGORIES_SQL, {"p": project, "bound": PROJECT_CATEGORIES}
                    )
                    categories = [c for (c,) in await cur.fetchall()]
                if len(categories) > PROJECT_CATEGORIES:
                    return
                now, cache = time.monotonic(), self._centroid_cache()
                stale = [
                    (project, c) for c in categories if not _fresh(cache.get((project, c)), now, max_age_s)
                ]
                if stale:
                    await self._read_centroids(stale, now)
            except Exception as e:  # a cache fill: the recall that needs a centroid reads it itself
                log.debug("category centroids of %s not prefilled: %s", project, e)
            finally:
                filling.pop(project, None)

        filling[project] = asyncio.ensure_future(fill())

    def _centroid_cache(self) -> dict[tuple[str, str], _Cached]:
        """(project, category) -> (monotonic time read, version, unit centroid or None), process-wide."""
        cache: dict[tuple[str, str], _Cached] = self.__dict__.setdefault("_centroids", {})
        return cache

    def cancel_background_reads(self) -> None:
        for task in list(self.__dict__.get("_filling", {}).values()):
            task.cancel()


# A category's version: its category_summaries row (member count, pending changes, last refresh),
# '' without one. Recall's rows carry their category's (``store/search.py``): a cached centroid of
# that version needs no statement.
CATEGORY_VERSION = (
    "coalesce((SELECT concat_ws(':', s.memory_count, s.pending, s.updated_at)"
    " FROM category_summaries s WHERE s.project = {project} AND s.category = {category}), '')"
)
# Each pair's version and, unless the caller's cached centroid has that version, the mean of its
# first memories. One statement, so the version and the mean come from one snapshot.
_CENTROIDS_SQL = (
    "SELECT w.project, w.category, v.version, w.have IS DISTINCT FROM v.version,"
    " CASE WHEN w.have IS DISTINCT FROM v.version THEN (SELECT avg(s.embedding) FROM"
    "  (SELECT m.embedding FROM memories m WHERE m.project = w.project AND m.category = w.category"
    "   AND m.embedding IS NOT NULL LIMIT %(n)s) s) END"
    " FROM unnest(%(p)s::text[], %(c)s::text[], %(have)s::text[]) AS w(project, category, have)"
    " CROSS JOIN LATERAL (SELECT "
    + CATEGORY_VERSION.format(project="w.project", category="w.category")
    + " AS version) v"
)


def _fresh(hit: _Cached | None, now: float, max_age_s: float) -> bool:
    return hit is not None and now - hit[0] <= max_age_s


# A project's categories, found by a skip scan of the (project, category) index (one probe per
# category), stopping one past the bound.
_PROJECT_CATEGORIES_SQL = (
    "WITH RECURSIVE cats(category, n) AS ("
    " (SELECT category, 1 FROM memories WHERE project = %(p)s AND category IS NOT NULL"
    "  ORDER BY category LIMIT 1)"
    " UNION ALL"
    " SELECT (SELECT m.category FROM memories m WHERE m.project = %(p)s AND m.category > c.category"
    "         ORDER BY m.category LIMIT 1), c.n + 1"
    " FROM cats c WHERE c.category IS NOT NULL AND c.n <= %(bound)s)"
    " SELECT category FROM cats WHERE category IS NOT NULL"
)
