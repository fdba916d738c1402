"""Queries of topics, fact types and category summaries (migration 0007); mixed into Store."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import Vector
from psycopg.types.json import Jsonb

from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.connection import read_again_once
from memlane.pipeline.store.vectors import project_is

# (project, topic name) -> [the sum of its new members' vectors, their number, its key terms]: what
# ``add_to_sums`` counts and ``upsert_topic_sums`` adds to the stored topics.
TopicSums = dict[tuple[str, str], list[Any]]


async def upsert_topic_sums(conn: psycopg.AsyncConnection, sums: TopicSums) -> None:
    """Add ``{(project, name): [vector sum, members, key terms]}`` to the automatic topics, creating
    the new ones: one statement, sorted so that concurrent writers lock topic rows in one order."""
    if not sums:
        return
    keys = sorted(sums)
    await conn.execute(
        "INSERT INTO memlane_topics AS t (project, name, centroid_sum, members, key_terms)"
        " SELECT u.project, u.name, u.vec, u.n, ARRAY(SELECT jsonb_array_elements_text(u.terms))"
        " FROM unnest(%s::text[], %s::text[], %b::vector[], %s::int4[], %s::jsonb[])"
        " AS u(project, name, vec, n, terms) ORDER BY u.project, u.name"
        " ON CONFLICT (project, name) DO UPDATE SET centroid_sum = t.centroid_sum + excluded.centroid_sum,"
        " members = t.members + excluded.members, updated_at = now()",
        (
            [k[0] for k in keys],
            [k[1] for k in keys],
            [np.asarray(sums[k][0], dtype=np.float32) for k in keys],
            [sums[k][1] for k in keys],
            [Jsonb(list(sums[k][2])) for k in keys],
        ),
    )


def add_to_sums(
    sums: TopicSums,
    project: str,
    vec: Sequence[float] | npt.NDArray[np.float32] | Vector,
    topics: Iterable[tuple[str, Iterable[str]]],
) -> None:
    """Count one memory's embedding into the topics it joined (``((name, key terms), ...)``)."""
    v = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)
    for name, terms in topics:
        entry = sums.setdefault((project, name), [np.zeros_like(v), 0, list(terms)])
        entry[0] = entry[0] + v
        entry[1] += 1


class TopicQueries(StorePart):
    """Needs ``_connection()`` (Store)."""

    @read_again_once
    async def auto_topics(self, project: str) -> list[tuple[str, Any, int, list[str]]]:
        """A project's automatic topics: (name, centroid sum, members, key terms)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT name, centroid_sum, members, key_terms FROM memlane_topics WHERE project = %s ORDER BY name",
                (project,),
            )
            return [(n, v, m, list(k)) for n, v, m, k in await cur.fetchall()]

    # -- backfill (memories stored before migration 0007) ---------------------------------------

    async def count_unassigned(self) -> int:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM memories WHERE topics IS NULL")
            count: int = (await one_row(cur))[0]
            return count

    async def unassigned(self, after: UUID | None, batch: int) -> list[dict[str, Any]]:
        """Memories without topics, by id: id, project, content, category, fact_type, embedding."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT id, project, content, category, fact_type, embedding FROM memories"
                " WHERE topics IS NULL AND (%s::uuid IS NULL OR id > %s::uuid) ORDER BY id LIMIT %s",
                (after, after, batch),
            )
            cols = ("id", "project", "content", "category", "fact_type", "embedding")
            return [dict(zip(cols, r, strict=True)) for r in await cur.fetchall()]

    async def assign_topics(
        self, updates: list[tuple[UUID, list[str], str, str | None]], sums: TopicSums
    ) -> int:
        """Set (id, topics, fact type, category or None to keep it) and add to the topics' centroids,
        in one transaction. Only rows still without topics change (a concurrent run did the rest)."""
        if not updates:
            return 0
        async with self._connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE memories m SET topics = ARRAY(SELECT jsonb_array_elements_text(u.topics)),"
                " fact_type = coalesce(m.fact_type, u.fact_type), category = coalesce(m.category, u.category)"
                " FROM unnest(%s::uuid[], %s::jsonb[], %s::text[], %s::text[]) AS u(id, topics, fact_type, category)"
                " WHERE m.id = u.id AND m.topics IS NULL",
                (
                    [u[0] for u in updates],
                    [Jsonb(u[1]) for u in updates],
                    [u[2] for u in updates],
                    [u[3] for u in updates],
                ),
            )
            await upsert_topic_sums(conn, sums)
            return cur.rowcount

    # -- category summaries ---------------------------------------------------------------------

    async def stale_categories(self, project: str | None, fraction: float) -> list[tuple[str, str, int]]:
        """(project, category, pending) of the summaries to refresh: never made, or at least
        ``fraction`` of the category (and at least one memory) changed since."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT project, category, pending FROM category_summaries"
                " WHERE (%s::text IS NULL OR project = %s)"
                " AND (summary IS NULL AND pending > 0 OR pending >= greatest(1, ceil(%s * memory_count)))"
                " ORDER BY project, category",
                (project, project, fraction),
            )
            return [tuple(r) for r in await cur.fetchall()]

    async def category_sample(self, project: str, category: str, limit: int) -> tuple[int, list[str]]:
        """The category's size and the text of up to ``limit`` of its newest memories."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM memories WHERE project = %s AND category = %s", (project, category)
            )
            (n,) = await one_row(cur)
            cur = await conn.execute(
                "SELECT content FROM memories WHERE project = %s AND category = %s"
                " ORDER BY created_at DESC, id LIMIT %s",
                (project, category, limit),
            )
            return n, [r[0] for r in await cur.fetchall()]

    async def word_document_frequency(self, project: str, words: list[str]) -> tuple[int, dict[str, int]]:
        """The project's memory count and, per word, how many of its memories hold the word's
        lexeme (the keyword arm's statistics, migration 0002)."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT w, max(coalesce(l.df, 0)), (SELECT coalesce(max(docs), 0) FROM memlane_projects"
                " WHERE project = %s) FROM unnest(%s::text[]) AS w"
                " LEFT JOIN LATERAL unnest(tsvector_to_array(to_tsvector('english'::regconfig, w))) AS lx ON true"
                " LEFT JOIN memlane_lexemes l ON l.project = %s AND l.lexeme = lx GROUP BY w",
                (project, words, project),
            )
            rows = await cur.fetchall()
        docs = rows[0][2] if rows else 0
        return int(docs), {w: int(df) for w, df, _ in rows}

    async def central_memories(self, project: str, category: str, n: int) -> list[str]:
        """The ``n`` memories of the category nearest its mean embedding, nearest first."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "WITH c AS (SELECT avg(embedding) AS v FROM memories"
                "  WHERE project = %(p)s AND category = %(c)s AND embedding IS NOT NULL)"
                f" SELECT m.content FROM memories m, c WHERE {project_is('m.project', project)} AND m.category = %(c)s"
                " AND m.embedding IS NOT NULL AND c.v IS NOT NULL ORDER BY m.embedding <=> c.v, m.content_hash LIMIT %(n)s",
                {"p": project, "c": category, "n": n},
            )
            return [r[0] for r in await cur.fetchall()]

    async def save_category_summary(
        self,
        project: str,
        category: str,
        *,
        summary: str,
        key_terms: list[str],
        memory_count: int,
        source: str,
        pending_seen: int,
    ) -> None:
        """Store a refreshed summary; changes made meanwhile stay pending. A category left with no
        memory loses its row."""
        async with self._connection() as conn, conn.transaction():
            if memory_count == 0:
                await conn.execute(
                    "DELETE FROM category_summaries WHERE project = %s AND category = %s AND pending <= %s",
                    (project, category, pending_seen),
                )
                return
            await conn.execute(
                "UPDATE category_summaries SET summary = %s, key_terms = %s, memory_count = %s, source = %s,"
                " updated_at = now(), pending = greatest(pending - %s, 0) WHERE project = %s AND category = %s",
                (summary, key_terms, memory_count, source, pending_seen, project, category),
            )

    async def read_category_summaries(
        self, project: str
    ) -> list[tuple[str, str, list[str], int, datetime | None, str | None]]:
        """(category, summary, key terms, memory count, updated_at, source), largest first: the
        categories that have a summary."""
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT category, summary, key_terms, memory_count, updated_at, source FROM category_summaries"
                " WHERE project = %s AND summary IS NOT NULL ORDER BY memory_count DESC, category",
                (project,),
            )
            return [tuple(r) for r in await cur.fetchall()]
