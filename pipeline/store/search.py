"""The read path of recall: the keyword and vector arms and the scoring of their candidates."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import numpy as np
import psycopg
from psycopg.rows import dict_row

from memlane.pipeline.config import RecallConfig
from memlane.pipeline.errors import ModelMismatch
from memlane.pipeline.records import Memory
from memlane.pipeline.request import Filters
from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.connection import read_again_once
from memlane.pipeline.store.filters import where as filters_where
from memlane.pipeline.store.handles import HANDLE8_UNIQUE
from memlane.pipeline.store.rows import (
    ACCESS_COLUMNS,
    ACCESS_JOIN,
    M_MEMORY_COLUMNS,
    MEMORY_WIDTH,
    row_to_memory,
    values_to_memory,
)
from memlane.pipeline.store.scoring import CATEGORY_VERSION
from memlane.pipeline.store.vectors import project_is

# What recall's stages 8 and 9 need of each candidate beside its row (see ``Hit``); the version is
# NULL for a memory without a category.
HANDLE_AND_VERSION = (
    f"{HANDLE8_UNIQUE} AS handle8_unique, CASE WHEN m.category IS NOT NULL THEN "
    + CATEGORY_VERSION.format(project="m.project", category="m.category")
    + " END AS category_version"
)

# The query as BM25 needs it: its distinct lexemes with their idf in the project, the project's
# average memory length, and the tsquery that selects candidates.
# - The tsquery ORs the lexemes: natural questions rarely have all their words in one memory, and
#   AND semantics (plainto_tsquery) finds about a fifth of OR's R@5 on the LoCoMo development set
#   (docs/benchmarks.md#the-evaluation-protocol-bench-locomo).
# - It leaves out lexemes that more than a share (recall.keyword_common_df) of the project's
#   memories contain, always keeping the rarest: they would make nearly every memory a candidate,
#   so the keyword arm would score the whole project. They still count in the score of the memories
#   the other lexemes select. Leaving out lexemes over 5% barely moves R@5 and R@20 on the
#   development set.
# - It reads at most recall.keyword_max_postings postings in all, whatever the project's size: the
#   kept lexemes, rarest first, while the sum of their document frequencies stays within it (a
#   rarest lexeme over it selects nothing). The share above still lets each lexeme have thousands of
#   postings in a large project, and the arm scores every memory they select. Each posting costs a
#   read of the memory's row, about a page apiece in a large project (5,283 rows on 4,798 pages for
#   one question at a million memories), which no index avoids: the default keeps the arm about as
#   fast as the question's embedding at that size.
# - Lexemes are quoted (backslashes dropped, quotes doubled) so none is read as an operator.
# The defaults of recall.keyword_common_df and recall.keyword_max_postings (one number each, in the
# schema), for ``KeywordBounds`` not read from a configuration.
KEYWORD_COMMON_DF: float = RecallConfig.model_fields["keyword_common_df"].default
KEYWORD_MAX_POSTINGS: int = RecallConfig.model_fields["keyword_max_postings"].default


@dataclass(frozen=True, slots=True)
class KeywordBounds:
    """How much of a project the keyword arm may read: the lexemes it leaves out of its tsquery
    (``recall.keyword_common_df``) and the postings it reads at most (``recall.keyword_max_postings``)."""

    common_df: float = KEYWORD_COMMON_DF
    max_postings: int = KEYWORD_MAX_POSTINGS

    @classmethod
    def of(cls, cfg: RecallConfig) -> KeywordBounds:
        return cls(cfg.keyword_common_df, cfg.keyword_max_postings)


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
           rank() OVER (ORDER BY coalesce(l.df, 0)) AS rarity,
           sum(coalesce(l.df, 0)) OVER (ORDER BY coalesce(l.df, 0), qlex.lx) AS postings
      FROM qlex CROSS JOIN ps
      LEFT JOIN memlane_lexemes l ON l.project = %(project)s AND l.lexeme = qlex.lx
),
qsel AS (
    SELECT qstat.*, (df <= %(common_df)s * docs OR rarity = 1) AS selective,
           postings <= %(max_postings)s AS within
      FROM qstat
),
qidf AS (
    SELECT array_agg(lx ORDER BY lx) AS lexemes,
           array_agg(idf ORDER BY lx) AS idfs,
           coalesce(string_agg('''' || replace(replace(lx, '\', ''), '''', '''''') || '''', ' | ')
                        FILTER (WHERE selective AND within),
                    '')::tsquery AS tq,
           coalesce(max(avgdl), 1.0) AS avgdl,
           coalesce(max(postings) FILTER (WHERE selective AND within), 0)::bigint AS postings,
           count(*) FILTER (WHERE selective AND NOT within) AS capped
      FROM qsel
)"""

# The same ``qidf`` from values a statement of the same recall already computed (``QueryTerms``): the
# keyword arm's statement reads them with its candidates, and the statements after the embedding
# (the union's scoring, the graph arm's new hits) take them as parameters, which about halves the
# planning and the execution of the union's scoring statement.
QIDF_GIVEN = (
    "qidf AS (SELECT %(q_lexemes)s::text[] AS lexemes, %(q_idfs)s::float8[] AS idfs,"
    " %(q_avgdl)s::float8 AS avgdl, %(q_tq)s::tsquery AS tq)"
)


@dataclass(frozen=True, slots=True)
class QueryTerms:
    """One question's ``qidf`` in one project (with one ``common_df``): its lexemes and their idf,
    the project's average memory length and the tsquery that selects keyword candidates."""

    lexemes: tuple[str, ...]
    idfs: tuple[float, ...]
    avgdl: float
    tsquery: str
    # Postings the tsquery selects (the sum of its lexemes' document frequencies), and how many
    # lexemes recall.keyword_max_postings left out of it: the keyword arm's bound, for the trace.
    postings: int = 0
    capped: int = 0

    def params(self) -> dict[str, Any]:
        return {
            "q_lexemes": list(self.lexemes),
            "q_idfs": list(self.idfs),
            "q_avgdl": self.avgdl,
            "q_tq": self.tsquery,
        }


# Okapi BM25 of memory ``m`` for the query in ``qidf`` (k1 = 0.9, b = 0.4, Anserini's defaults; the
# document length is its number of distinct lexemes, as in memlane_projects.lexemes). The same sum as
# migration 0002's memlane_bm25 function, written inline as a scalar subquery: PostgreSQL cannot
# inline a SQL function with a FROM clause, and calling one per row cost several times this form
# (the keyword arm scores every memory its tsquery selects: thousands for a question of common
# words). The memory's lexemes are first cut down to the query's
# (setweight marks them, ts_filter keeps the marked), so the subquery reads a few entries instead of
# the whole memory; each entry's idf is looked up by its position in the query's sorted lexemes
# rather than by a join (a join made the planner build a hash table per row, about three times the
# cost of the row's score).
BM25_K1, BM25_B = 0.9, 0.4
BM25 = (
    f"(SELECT coalesce(sum(qidf.idfs[array_position(qidf.lexemes, u.lexeme)] * tf.n * {BM25_K1 + 1}::float8"
    f" / (tf.n + {BM25_K1}::float8 * ({1 - BM25_B}::float8 + {BM25_B}::float8 * length(m.tsv) / greatest(qidf.avgdl, 1.0)))), 0)"
    " FROM unnest(ts_filter(setweight(m.tsv, 'A', qidf.lexemes), ARRAY['a']::\"char\"[])) AS u"
    " CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS n) AS tf)"
)


@dataclass(frozen=True, slots=True)
class SqlArm:
    """A store arm's part of the joint statement (see ``pipeline/recall/arms.py``): a CTE of its top k
    candidate ids, and a score expression over ``m`` that is computed for every candidate."""

    cte: str
    # The candidate query (id first), with {where} for the shared filters, {passages_where} for the
    # passages' project and {k}.
    select: str
    score: str
    needs_embedding: bool
    # Its candidate query reads the question's lexemes (QUERY_CTES). The vector arm's does not, and
    # its statement is kept free of them: it runs faster so, even though PostgreSQL never runs an
    # unreferenced CTE.
    reads_lexemes: bool

    def query(self, where: str, k: int, project: str) -> str:
        return self.select.format(where=where, k=int(k), passages_where=project_is("p.project", project))


# LIMIT {k}: the number in the statement's text, not a parameter: a prepared statement's generic plan
# (store/connection.py) guesses a parameter LIMIT at a tenth of the rows it limits, and that guess
# can make the union's join read the whole project.
# %(emb)b: the question's vector goes in pgvector's binary form, as the write path's do; printed as
# decimals it costs the event loop about a hundred times as much.
#
# The vector arm reads a long memory's passages too (remember/passages.py): its candidates are the
# top k by the closer of the memory's own vector and its best passage, and its score is that
# closer cosine. A passage counts PASSAGE_MARGIN less than the memory's own vector: taken at par,
# a reply cut into six passages got six chances against a user's one-line statement, and on BEAM's
# coding chats the statements the questions ask for lost their places (the vector arm's R@10 fell
# from 0.562 to 0.461). At 0.2 it stays 0.563, and a sentence from past a reply's first window finds
# the reply in the first 10 for 73% of 594 sentences instead of 60%.
PASSAGE_MARGIN = 0.2
_VECTOR_SELECT = (
    "SELECT id FROM ("
    "(SELECT m.id, m.embedding <=> %(emb)b AS d, m.content_hash AS tie FROM memories m"
    " WHERE {where} AND m.embedding IS NOT NULL ORDER BY m.embedding <=> %(emb)b, m.content_hash LIMIT {k})"
    " UNION ALL"
    f" (SELECT m.id, (p.embedding <=> %(emb)b) + {PASSAGE_MARGIN} AS d, m.content_hash AS tie"
    " FROM memory_passages p JOIN memories m ON m.id = p.memory_id"
    " WHERE {passages_where} AND {where} ORDER BY p.embedding <=> %(emb)b LIMIT {k})"
    ") AS c GROUP BY id, tie ORDER BY min(d), tie LIMIT {k}"
)
_VECTOR_SCORE = (
    "greatest(1 - (m.embedding <=> %(emb)b),"
    f" (SELECT max(1 - (p.embedding <=> %(emb)b)) FROM memory_passages p WHERE p.memory_id = m.id) - {PASSAGE_MARGIN})"
)
SQL_ARMS: dict[str, SqlArm] = {
    "vector": SqlArm(
        cte="vec",
        select=_VECTOR_SELECT,
        score=_VECTOR_SCORE,
        needs_embedding=True,
        reads_lexemes=False,
    ),
    "keyword": SqlArm(
        cte="kw",
        select=f"SELECT m.id, {BM25} AS score, m.content_hash AS tie FROM memories m, qidf"
        " WHERE {where} AND m.tsv @@ qidf.tq ORDER BY score DESC, tie LIMIT {k}",
        score=BM25,
        needs_embedding=False,
        reads_lexemes=True,
    ),
}


@dataclass(frozen=True, slots=True)
class Hit:
    """A retrieved memory, its score on every arm (cosine similarity, BM25) and the arms whose top k
    it was in; ``search`` also reads whether its 8-digit handle is unique (``HANDLE8_UNIQUE``) and
    its category's version (``CATEGORY_VERSION``), so recall's stages 8 and 9 usually need no
    statement of their own."""

    memory: Memory
    scores: dict[str, float]
    found_by: tuple[str, ...]
    handle8_unique: bool | None = None
    category_version: str | None = None


def _raise_if_mismatch(e: psycopg.errors.DataException) -> None:
    """A vector query's data error that says the stored vectors changed size under this process
    (`memlane reembed` to another model ran while it was serving) becomes a ModelMismatch."""
    if "different vector dimensions" in str(e):
        raise ModelMismatch(
            f"the store's vectors no longer match this process's embedding model ({e}); "
            "`memlane reembed` probably switched the model: restart memlane configured with it"
        ) from e


class SearchQueries(StorePart):
    """Mixed into Store; needs ``_connection()`` and the module's row mapping."""

    @staticmethod
    def _where(filters: Filters, text: str, bounds: KeywordBounds) -> tuple[str, dict[str, Any]]:
        """The filters' conditions, and the parameters of the question's lexemes (``QUERY_CTES``)."""
        conditions, params = filters_where(filters)
        params.update(
            project=filters.project, q=text, common_df=bounds.common_df, max_postings=bounds.max_postings
        )
        return conditions, params

    @read_again_once
    async def candidates(
        self,
        arm: str,
        *,
        text: str,
        filters: Filters,
        k: int,
        bounds: KeywordBounds = KeywordBounds(),
        embedding: list[float] | None = None,
    ) -> tuple[list[UUID], list[float] | None, QueryTerms | None]:
        """One store arm alone, for ``text`` among the memories ``filters`` admits: the ids of its top
        k (for the keyword arm best first, ties by content), and for an arm that reads the
        question's lexemes (keyword) their scores and the question's statistics (``QueryTerms``,
        for ``search``). Recall runs the arms that need no embedding (keyword) while the question
        is being embedded, and the others (vector, given ``embedding``) as soon as it is, each on
        its own connection, before one ``search`` scores them all."""
        spec = SQL_ARMS[arm]
        if spec.needs_embedding and embedding is None:
            raise ValueError(f"the {arm} arm needs an embedding")
        where, params = self._where(filters, text, bounds)
        if embedding is not None:
            params["emb"] = np.asarray(embedding, dtype=np.float32)
        sql = f"{spec.cte} AS ({spec.query(where, k, filters.project)})"
        if not spec.reads_lexemes:
            sql = f"WITH {sql} SELECT array_agg(id), NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM {spec.cte}"
        else:
            sql = (
                f"WITH {QUERY_CTES}, {sql} SELECT ids, scores,"
                " qidf.lexemes, qidf.idfs, qidf.avgdl, qidf.tq::text, qidf.postings, qidf.capped FROM qidf,"
                f" (SELECT array_agg(id ORDER BY score DESC, tie) AS ids,"
                f" array_agg(score ORDER BY score DESC, tie) AS scores FROM {spec.cte}) AS top"
            )
        async with self._connection() as conn:
            try:
                cur = await conn.execute(sql, params, binary=True)
            except psycopg.errors.DataException as e:
                _raise_if_mismatch(e)
                raise
            ids, scores, lexemes, idfs, avgdl, tsquery, postings, capped = await one_row(cur)
        terms = None
        if spec.reads_lexemes:
            terms = QueryTerms(
                tuple(lexemes or ()),
                tuple(float(x) for x in idfs or ()),
                float(avgdl),
                tsquery,
                int(postings or 0),
                int(capped or 0),
            )
        return list(ids or ()), [float(x) for x in scores or ()] if spec.reads_lexemes else None, terms

    @read_again_once
    async def search(
        self,
        *,
        text: str,
        embedding: list[float] | None,
        filters: Filters,
        k: int,
        bounds: KeywordBounds = KeywordBounds(),
        arms: tuple[str, ...] = tuple(SQL_ARMS),
        preselected: dict[str, list[UUID]] | None = None,
        terms: QueryTerms | None = None,
    ) -> list[Hit]:
        """Run the store arms (each its top k; an arm in ``preselected`` already ran, through
        ``candidates``), then score every candidate of any arm on every arm that can score it:
        exact scores for the union let fusion weigh a memory that another arm ranked just outside
        its top k. ``terms``: this text's ``QueryTerms`` in this project (with these
        ``bounds``), when ``candidates`` read them already."""
        preselected = preselected or {}
        where, params = self._where(filters, text, bounds)
        if embedding is not None:
            params["emb"] = np.asarray(embedding, dtype=np.float32)
        usable = {n: s for n, s in SQL_ARMS.items() if embedding is not None or not s.needs_embedding}
        selecting = [n for n in usable if n in arms]
        if not selecting:
            return []
        ctes = [QUERY_CTES]
        if terms is not None:
            ctes = [QIDF_GIVEN]
            params.update(terms.params())
        for name in selecting:
            spec = usable[name]
            if name in preselected:
                params[f"{name}_ids"] = preselected[name]
                ctes.append(f"{spec.cte} AS (SELECT unnest(%({name}_ids)b::uuid[]) AS id)")
            else:
                ctes.append(f"{spec.cte} AS ({spec.query(where, k, filters.project)})")
        cols = M_MEMORY_COLUMNS
        scores = ", ".join(f"{spec.score} AS {name}_score" for name, spec in usable.items())
        flags = ", ".join(f"m.id IN (SELECT id FROM {usable[n].cte}) AS in_{n}" for n in selecting)
        union = " UNION ".join(f"SELECT id FROM {usable[n].cte}" for n in selecting)
        sql = (
            f"WITH {', '.join(ctes)} SELECT {cols}, {ACCESS_COLUMNS}, {HANDLE_AND_VERSION}, {scores}, {flags}"
            f" FROM ({union}) AS ids JOIN memories m ON m.id = ids.id {ACCESS_JOIN} CROSS JOIN qidf"
        )
        async with self._connection() as conn:
            try:
                cur = await conn.execute(sql, params, binary=True)
            except psycopg.errors.DataException as e:
                _raise_if_mismatch(e)
                raise
            rows = await cur.fetchall()
        # Tuple rows: the memory's columns, its access statistics, its handle's and category's
        # reads, a score per usable arm, a flag per selecting arm.
        w = MEMORY_WIDTH
        names, n_scores = list(usable), len(usable)
        return [
            Hit(
                memory=values_to_memory(r, r[w : w + 2]),
                scores=dict(zip(names, map(float, r[w + 4 : w + 4 + n_scores]), strict=True)),
                found_by=tuple(n for n, flag in zip(selecting, r[w + 4 + n_scores :], strict=True) if flag),
                handle8_unique=r[w + 2],
                category_version=r[w + 3],
            )
            for r in rows
        ]

    async def instructions(
        self, projects: tuple[str, ...], embedding: list[float] | None, limit: int
    ) -> list[tuple[Memory, float | None]]:
        """The current standing instructions and preferences of ``projects`` (fact types
        ``instruction``, ``preference``; migration 0015's index), with their cosine to ``embedding``
        (None without one): the closest first, at most ``limit``; without an embedding the newest."""
        params: dict[str, Any] = {"projects": list(projects), "limit": int(limit)}
        if embedding is not None:
            params["emb"] = np.asarray(embedding, dtype=np.float32)
            cosine, order = "1 - (m.embedding <=> %(emb)b)", "sim DESC NULLS LAST, m.id"
        else:
            cosine, order = "NULL::float8", "m.created_at DESC, m.id"
        sql = (
            "WITH d AS MATERIALIZED (SELECT id FROM memories WHERE project = ANY(%(projects)s)"
            " AND fact_type IN ('instruction', 'preference') AND superseded_by IS NULL"
            " AND (expires_at IS NULL OR expires_at > now()))"
            f" SELECT {M_MEMORY_COLUMNS}, {ACCESS_COLUMNS}, {cosine} AS sim FROM d"
            f" JOIN memories m ON m.id = d.id {ACCESS_JOIN} ORDER BY {order} LIMIT %(limit)s"
        )
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params, binary=True)
            rows = await cur.fetchall()
        return [(row_to_memory(r), None if r["sim"] is None else float(r["sim"])) for r in rows]

    async def in_range(
        self,
        *,
        text: str,
        embedding: list[float] | None,
        filters: Filters,
        ranges: list[tuple[datetime | None, datetime | None]],
        k: int,
        max_scan: int,
        bounds: KeywordBounds = KeywordBounds(),
    ) -> tuple[list[Hit], int]:
        """The temporal arm's read: memories whose ``occurred_at`` falls in any of ``ranges``
        (``(start, end)``, start inclusive, end exclusive, ``None`` open), or whose event time
        (migration 0014) overlaps one, among those ``filters`` admits, at most ``max_scan`` of them
        (the latest) read through the (project, occurred_at) and event-time indexes, scored exactly by cosine to ``embedding`` and BM25 of ``text``; returns the best ``k`` by cosine + BM25 / best BM25
        in the range, and how many were scanned."""
        where, params = self._where(filters, text, bounds)
        clauses = []
        for i, (start, end) in enumerate(ranges):
            parts = ["m.occurred_at IS NOT NULL"]
            if start is not None:
                parts.append(f"m.occurred_at >= %(start{i})s")
                params[f"start{i}"] = start
            if end is not None:
                parts.append(f"m.occurred_at < %(end{i})s")
                params[f"end{i}"] = end
            # The event-time index's expression, so the planner can use it.
            event = (
                "(m.event_start IS NOT NULL AND tstzrange(m.event_start, m.event_end)"
                f" && tstzrange(%(start{i})s::timestamptz, %(end{i})s::timestamptz))"
            )
            params.setdefault(f"start{i}", None)
            params.setdefault(f"end{i}", None)
            clauses.append("((" + " AND ".join(parts) + f") OR {event})")
        if not clauses:
            return [], 0
        if embedding is not None:
            params["emb"] = np.asarray(embedding, dtype=np.float32)
            cosine = "1 - (m.embedding <=> %(emb)b)"
        else:
            cosine = "NULL::float8"
        cols = M_MEMORY_COLUMNS
        sql = (
            f"WITH {QUERY_CTES},"
            f" inr AS MATERIALIZED (SELECT m.id FROM memories m WHERE {where}"
            f" AND ({' OR '.join(clauses)})"
            f" ORDER BY coalesce(m.event_start, m.occurred_at) DESC LIMIT {int(max_scan)}),"
            f" scored AS (SELECT m.id, {cosine} AS vector_score,"
            f" CASE WHEN m.tsv @@ qidf.tq THEN {BM25} ELSE 0 END AS keyword_score"
            f" FROM inr JOIN memories m ON m.id = inr.id CROSS JOIN qidf),"
            f" top AS (SELECT id, vector_score, keyword_score, count(*) OVER () AS scanned,"
            f" coalesce(vector_score, 0) + coalesce(keyword_score / nullif(max(keyword_score) OVER (), 0), 0)"
            f" AS arm_score FROM scored ORDER BY arm_score DESC, id LIMIT {int(k)})"
            f" SELECT {cols}, {ACCESS_COLUMNS}, top.vector_score, top.keyword_score, top.scanned FROM top"
            f" JOIN memories m ON m.id = top.id {ACCESS_JOIN} ORDER BY top.arm_score DESC, m.content_hash"
        )
        async with self._connection() as conn:
            cur = await conn.cursor(row_factory=dict_row).execute(sql, params, binary=True)
            rows = await cur.fetchall()
        scanned = int(rows[0]["scanned"]) if rows else 0
        hits = []
        for r in rows:
            scores = {"keyword": float(r["keyword_score"])}
            if r["vector_score"] is not None:
                scores["vector"] = float(r["vector_score"])
            hits.append(Hit(memory=row_to_memory(r), scores=scores, found_by=("temporal",)))
        return hits, scanned
