"""The read path of recall: the keyword and vector arms and the scoring of their candidates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

import numpy as np
from psycopg.rows import dict_row

from ..records import Memory
from .rows import MEMORY_COLUMNS, row_to_memory

# The query as BM25 needs it: its distinct lexemes with their idf in the project, the project's
# average memory length, and the tsquery that selects candidates.
# - The tsquery ORs the lexemes: natural questions rarely have all their words in one memory, and
#   AND semantics (plainto_tsquery) reaches R@5 0.095 against 0.524 for OR on the LoCoMo
#   development set (shared/docs/EVAL.md).
# - It leaves out lexemes that more than a share (recall.keyword_common_df) of the project's
#   memories contain, always keeping the rarest: they would make nearly every memory a candidate,
#   so the keyword arm would score the whole project (246 ms at 60k memories). They still count in the score of the
#   memories the other lexemes select. On the development set, leaving out lexemes over 5% changes
#   R@5 by -0.001 and R@20 by +0.003.
# - Lexemes are quoted (backslashes dropped, quotes doubled) so none is read as an operator.
QUERY_CTES = r"""
qlex AS (
    SELECT DISTINCT lx FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(q)s))) AS lx
),
ps AS (
    SELECT coalesce(max(p.docs), 0) AS docs,
           coalesce(max(p.lexemes::float8 / nullif(p.docs, 0)), 1.0) AS avgdl
      FROM memlane_projects p WHERE p.project = %(project)s
),
qstat AS (
    SELECT qlex.lx, coalesce(l.df, 0) AS df, ps.docs, ps.avgdl,
           ln(1 + (ps.docs - coalesce(l.df, 0) + 0.5) / (coalesce(l.df, 0) + 0.5)) AS idf,
           rank() OVER (ORDER BY coalesce(l.df, 0)) AS rarity
      FROM qlex CROSS JOIN ps
      LEFT JOIN memlane_lexemes l ON l.project = %(project)s AND l.lexeme = qlex.lx
),
qidf AS (
    SELECT array_agg(lx ORDER BY lx) AS lexemes,
           array_agg(idf ORDER BY lx) AS idfs,
           coalesce(string_agg('''' || replace(replace(lx, '\', ''), '''', '''''') || '''', ' | ')
                        FILTER (WHERE df <= %(common_df)s * docs OR rarity = 1),
                    '')::tsquery AS tq,
           coalesce(max(avgdl), 1.0) AS avgdl
      FROM qstat
)"""

BM25 = "memlane_bm25(m.tsv, qidf.lexemes, qidf.idfs, qidf.avgdl)"


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved memory, its score on every arm (cosine similarity, BM25) and the arms whose top k
    it was in."""

    memory: Memory
    scores: dict[str, float]
    found_by: tuple[str, ...]


class SearchQueries:
    """Mixed into Store; needs ``_connection()`` and the module's row mapping."""

    @staticmethod
    def _where(project, query, k, category, tags, common_df) -> tuple[str, dict[str, Any]]:
        filters = ["m.project = %(project)s", "(m.expires_at IS NULL OR m.expires_at > now())"]
        params: dict[str, Any] = {"project": project, "q": query, "k": k, "common_df": common_df}
        if category is not None:
            filters.append("m.category = %(category)s")
            params["category"] = category
        if tags:
            filters.append("m.tags @> %(tags)s")
            params["tags"] = list(tags)
        return " AND ".join(filters), params

    @staticmethod
    def _keyword_cte(where: str) -> str:
        return (
            f"kw AS (SELECT m.id FROM memories m, qidf WHERE {where} AND m.tsv @@ qidf.tq"
            f" ORDER BY {BM25} DESC, m.content_hash LIMIT %(k)s)"
        )

    async def keyword_candidates(
        self,
        *,
        project: str,
        query: str,
        k: int,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        common_df: float = 0.05,
    ) -> list[UUID]:
        """The keyword arm alone: ids of the top k memories by BM25. Needs no embedding, so recall
        runs it while the query is being embedded."""
        where, params = self._where(project, query, k, category, tags, common_df)
        sql = f"WITH {QUERY_CTES}, {self._keyword_cte(where)} SELECT id FROM kw"
        async with self._connection() as conn:
            cur = await conn.execute(sql, params)
            return [r[0] for r in await cur.fetchall()]

    async def search(
        self,
        *,
        project: str,
        query: str,
        embedding: list[float] | None,
        k: int,
        category: str | None = None,
        tags: tuple[str, ...] = (),
        arms: tuple[str, ...] = ("vector", "keyword"),
        common_df: float = 0.05,
        keyword_ids: list[UUID] | None = None,
    ) -> list[Hit]:
        """Run the vector arm (top k by cosine) and the keyword arm (top k by BM25; or take its result,
        ``keyword_ids``, from keyword_candidates), then score every candidate of either arm on both:
        exact scores for the union let fusion weigh a memory that the other arm ranked just outside
        its top k."""
        where, params = self._where(project, query, k, category, tags, common_df)
        ctes, arm_ids = [QUERY_CTES], []
        use_vector = "vector" in arms and embedding is not None
        use_keyword = "keyword" in arms
        if use_vector:
            params["emb"] = np.asarray(embedding, dtype=np.float32)
            ctes.append(
                "vec AS (SELECT m.id FROM memories m"
                f" WHERE {where} AND m.embedding IS NOT NULL ORDER BY m.embedding <=> %(emb)s, m.content_hash LIMIT %(k)s)"
            )
            arm_ids.append("SELECT id FROM vec")
        if use_keyword:
            if keyword_ids is None:
                ctes.append(self._keyword_cte(where))
            else:
                params["kw_ids"] = keyword_ids
                ctes.append("kw AS (SELECT unnest(%(kw_ids)s::uuid[]) AS id)")
            arm_ids.append("SELECT id FROM kw")
        if not arm_ids:
            return []
        cols = ", ".join("m." + c.strip() for c in MEMORY_COLUMNS.split(","))
        vector_score = "1 - (m.embedding <=> %(emb)s)" if use_vector else "NULL::float8"
        in_vector = "m.id IN (SELECT id FROM vec)" if use_vector else "false"
        in_keyword = "m.id IN (SELECT id FROM kw)" if use_keyword else "false"
        sql = (
            f"WITH {', '.join(ctes)} SELECT {cols}, {BM25} AS keyword_score, {vector_score} AS vector_score,"
            f" {in_vector} AS in_vector, {in_keyword} AS in_keyword"
            f" FROM ({' UNION '.join(arm_ids)}) AS ids JOIN memories m ON m.id = ids.id CROSS JOIN qidf"
        )
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params)
            rows = await cur.fetchall()
        hits = []
        for r in rows:
            scores = {"keyword": float(r["keyword_score"])}
            if r["vector_score"] is not None:
                scores["vector"] = float(r["vector_score"])
            found = tuple(a for a in ("vector", "keyword") if r[f"in_{a}"])
            hits.append(Hit(memory=row_to_memory(r), scores=scores, found_by=found))
        return hits
