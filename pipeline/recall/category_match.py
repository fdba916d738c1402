"""How well the question matches each category of the candidates: a number from 0 to 1 per
(project, category), which stage 8 turns into the category boost.

One entry point, :func:`match_categories`, so other sources can plug in:

- with an LLM configured for the ``category_match`` stage, the ``category_match`` prompt rates
  every category, each shown with its description (:func:`category_descriptions`);
- offline (or when that call fails), the cosine similarity of the question's embedding to the
  category's centroid (the mean embedding of its memories, pgvector ``avg``), cached in the process
  for ``recall.adjust.category_cache_s``; negative similarities count as 0.

A category's description is, today, a few of its candidates (escaped, shortened). A later source of
category summaries replaces :func:`category_descriptions` (and may replace the centroid by the
summary's embedding) without touching the scoring stage.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memlane.pipeline.llm.service import parse_json
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import stage_llm
from memlane.pipeline.records import Candidate

Pair = tuple[str, str]  # (project, category)
EXAMPLES_PER_CATEGORY = 2
EXAMPLE_CHARS = 160


@dataclass(slots=True)
class CategoryMatch:
    scores: dict[Pair, float] = field(default_factory=dict)
    implementation: str = "offline"  # "offline (centroid cosine)", "llm", or why none ran
    prompt: str | None = None
    degraded: str | None = None  # the LLM's failure, when the offline match stood in
    detail: dict[str, Any] = field(default_factory=dict)


def category_descriptions(candidates: list[Candidate], pairs: list[Pair]) -> dict[str, str]:
    """What the prompt shows for each category name: its first candidates, shortened."""
    names = sorted({c for _, c in pairs})
    examples: dict[str, list[str]] = {n: [] for n in names}
    for cand in candidates:
        cat = cand.memory.category
        if cat in examples and len(examples[cat]) < EXAMPLES_PER_CATEGORY:
            text = cand.memory.content
            examples[cat].append(text if len(text) <= EXAMPLE_CHARS else text[: EXAMPLE_CHARS - 1] + "…")
    return {n: " | ".join(examples[n]) for n in names}


def render_categories(descriptions: dict[str, str]) -> str:
    return "\n".join(
        f'<category name="{html.escape(name, quote=True)}">e.g. {html.escape(text, quote=False)}</category>'
        for name, text in descriptions.items()
    )


def parse_ratings(data: Any, names: list[str]) -> dict[str, float]:  # data: the LLM's JSON
    """The model's ratings of the listed names, clamped to 0-1; unknown names ignored, missing ones 0.
    Raises LLMError for anything but an object of numbers."""
    if not isinstance(data, dict):
        raise LLMError(f"category_match answer is not a JSON object: {type(data).__name__}")
    out: dict[str, float] = {}
    for name in names:
        value = data.get(name, 0.0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise LLMError(f"category_match rated {name!r} with {value!r}, not a number")
        out[name] = min(1.0, max(0.0, float(value)))
    return out


async def _offline(ctx: RecallContext, pairs: list[Pair]) -> CategoryMatch:
    q = ctx.question_vector
    if q is None:
        return CategoryMatch(implementation="skipped: no question embedding (the vector arm did not run)")
    early = ctx.reads.centroids
    if early is not None and early.pairs.issuperset(pairs):
        read = await early.read
        centroids = {pair: read[pair] for pair in pairs if pair in read}
    else:
        centroids = await ctx.store.category_centroids(
            pairs, max_age_s=ctx.config.recall.adjust.category_cache_s
        )
    qv = np.asarray(q, dtype=np.float32)
    norm = float(np.linalg.norm(qv))
    if norm == 0:
        return CategoryMatch(implementation="skipped: zero question embedding")
    qv = qv / norm
    scores = {pair: max(0.0, float(np.dot(qv, vec))) for pair, vec in centroids.items()}
    return CategoryMatch(scores=scores, implementation="offline (cosine to the category centroid)")


async def match_categories(
    ctx: RecallContext, candidates: list[Candidate], pairs: list[Pair]
) -> CategoryMatch:
    """Per (project, category) of the candidates, how well the question matches it (0 to 1)."""
    if not pairs:
        return CategoryMatch(implementation="skipped: no candidate has a category")
    llm, _why = stage_llm(ctx, "category_match")
    if llm is None:
        return await _offline(ctx, pairs)
    descriptions = category_descriptions(candidates, pairs)
    names = list(descriptions)
    try:
        answer = await llm.ask(ctx, question=ctx.request.query, categories=render_categories(descriptions))
        ratings = parse_ratings(parse_json(answer.text), names)
    except LLMError as e:
        fallback = await _offline(ctx, pairs)
        fallback.degraded = e.reason
        fallback.prompt = llm.prompt.id
        return fallback
    return CategoryMatch(
        scores={pair: ratings[pair[1]] for pair in pairs},
        implementation="llm",
        prompt=answer.prompt_id,
        detail=answer.detail(),
    )
