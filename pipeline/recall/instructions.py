"""A step of stage 8 (``run.py``'s ``STAGE8_STEPS``): the standing instructions and preferences
that apply to the request.

"Always format code snippets with syntax highlighting when I ask about implementation details"
governs "How do I implement a login feature?", with which it shares almost no word; "I prefer
simple, minimal dependencies" governs "What libraries should I use?". The arms rank such a memory
low, so recall reads the project's current instructions (fact types ``instruction`` and
``preference``, ``remember/facttypes.py``; a partial index, migration 0015) on every request and
judges each by the closer of two cosines to the question: its whole text's (the store computes it),
and its condition's when it names one ("when I ask about implementation details": the condition is
what the request must be about). Those at ``[recall] instruction_min_similarity`` or above, at most
``[recall] instructions_max`` of them, best first, are brought in after the first
``INSTRUCTIONS_AFTER`` candidates (or moved there when they rank lower), with the score of the
candidate they follow: the client sees them within the token budget, marked ``kind:
"instruction"`` (``render.py``). A question about the past or across projects is asked the same way.

The condition's vector is embedded once per memory and kept in a small process cache (an edit
changes the content, and with it the cache key).
"""

from __future__ import annotations

import asyncio
import re
from collections import OrderedDict
from typing import Any

import numpy as np

from memlane.pipeline.providers.embedding import embed_texts
from memlane.pipeline.providers.embedding.base import unit_rows
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Candidate

# Instructions read per request, the closest first: a project has few.
READ = 16
# Where the instructions go: after the best answers, before the rest (the first page a client reads).
INSTRUCTIONS_AFTER = 2
_CONDITION = re.compile(
    r"\bwhen(?:ever)? I ask (?:you )?(?:about|for|how to|how|to)\s+(.{3,200}?)(?:[.!?;]|->|,\s*(?:please|and)\b|$)",
    re.I,
)
_CACHE: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_CACHE_SIZE = 4096


def condition(content: str) -> str | None:
    """What a request must be about for an instruction to apply ("implementation details"), or None."""
    m = _CONDITION.search(content)
    return m.group(1).strip() if m else None


async def _condition_vectors(ctx: RecallContext, texts: dict[str, str]) -> dict[str, np.ndarray]:
    """``{memory id: its condition's unit vector}``, from the cache or embedded now (one batch)."""
    out: dict[str, np.ndarray] = {}
    missing = {}
    for mid, text in texts.items():
        hit = _CACHE.get((mid, text))
        if hit is not None:
            _CACHE.move_to_end((mid, text))
            out[mid] = hit
        else:
            missing[mid] = text
    if missing:
        vectors = await embed_texts(
            ctx.embedder, list(missing.values()), ctx.config.embedding.embed_timeout_s
        )
        for (mid, text), v in zip(missing.items(), unit_rows(vectors), strict=True):
            out[mid] = _CACHE[(mid, text)] = v
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return out


def _wanted(ctx: RecallContext) -> bool:
    cfg = ctx.config.recall
    return cfg.instructions_max > 0 and cfg.steps.instructions and ctx.request.ablation.adjustments


def read_ahead(ctx: RecallContext) -> None:
    """Start stage 8's read as soon as the question is embedded (retrieval calls this): its round
    trip then runs beside the arms' searches, not after them."""
    if ctx.reads.instructions is None and ctx.question_vector is not None and _wanted(ctx):
        ctx.reads.instructions = asyncio.ensure_future(
            ctx.store.instructions(ctx.request.searched_projects, ctx.question_vector, READ)
        )


async def apply(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    cfg = ctx.config.recall
    if cfg.instructions_max <= 0:
        return Step(candidates, status="skipped: [recall] instructions_max = 0")
    question = ctx.question_vector
    if question is None:
        return Step(candidates, status="skipped: the question was not embedded")
    read_ahead(ctx)
    assert ctx.reads.instructions is not None  # (started above when it was not)
    found = await asyncio.shield(ctx.reads.instructions)
    now = ctx.clock()
    found = [(m, sim) for m, sim in found if ctx.request.filters.admits(m, now)]
    if not found:
        return Step(candidates, status="skipped: no instruction or preference in the project")
    conditions = {str(m.id): c for m, _ in found if (c := condition(m.content))}
    [q] = unit_rows([question])
    vectors = await _condition_vectors(ctx, conditions) if conditions else {}
    judged = []
    for m, sim in found:
        by_condition = float(vectors[str(m.id)] @ q) if str(m.id) in vectors else None
        judged.append((max((s for s in (sim, by_condition) if s is not None), default=0.0), m))
    chosen = sorted([(s, m) for s, m in judged if s >= cfg.instruction_min_similarity], key=lambda p: -p[0])[
        : cfg.instructions_max
    ]
    detail: dict[str, Any] = {"read": len(found), "applies": [[str(m.id), round(s, 3)] for s, m in chosen]}
    if not chosen:
        return Step(candidates, detail=detail)
    out = list(candidates)
    at = min(INSTRUCTIONS_AFTER, len(out))
    brought = 0
    for _, m in reversed(chosen):  # the best ends up first
        j = next((k for k, c in enumerate(out) if c.memory.id == m.id), None)
        if j is not None and j <= at:
            continue  # already among the first answers
        if j is not None:
            cand = out.pop(j)
        else:
            cand = Candidate(memory=m)
            brought += 1
        cand.score = max(cand.score, out[at - 1].score if at > 0 else cand.score)
        out.insert(at, cand)
    detail["brought_in"] = brought
    return Step(out, detail=detail)
