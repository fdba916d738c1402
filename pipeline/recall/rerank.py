"""Stage 6, rerank: the ``rerank`` prompt shows the top ``recall.rerank_top_n`` fused candidates,
numbered, each with its date and category, and the LLM answers with the indices of the truly
relevant ones, most useful first. Those, in that order, are the result; the others are dropped.

Out-of-range and repeated indices are dropped. An empty answer ("nothing is relevant") is honoured
only when no candidate shares a word with the question; otherwise it is treated as a fault and the
fused order stands. Memory text is data: it is escaped inside ``<memory>`` tags, so a memory that
says "ignore previous instructions" cannot close its tag or pass for the prompt's own text.

Offline, ``recall.cross_encoder`` may name a local sentence-transformers CrossEncoder model
directory (no PyPI package ships such weights today); it then reorders the top candidates.
Otherwise the fused order is kept.
"""

from __future__ import annotations

import asyncio
import functools
import html
from typing import TYPE_CHECKING, Any

from memlane.pipeline.llm.service import parse_json
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step, stage_llm
from memlane.pipeline.records import Candidate

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder


def render_candidates(candidates: list[Candidate]) -> str:
    lines = []
    for i, c in enumerate(candidates, start=1):
        m = c.memory
        when = (m.occurred_at or m.created_at).date().isoformat()
        category = html.escape(m.category or "none", quote=True)
        lines.append(
            f'<memory index="{i}" date="{when}" category="{category}">\n'
            f"{html.escape(m.content, quote=False)}\n</memory>"
        )
    return "\n".join(lines)


def parse_indices(data: Any, n: int) -> list[int]:  # data: the LLM's JSON
    """0-based positions from a JSON array of 1-based indices; the out-of-range and repeated ones
    dropped. Raises LLMError for anything but an array of integers."""
    if isinstance(data, dict):  # {"indices": [...]} and similar wrappers
        arrays = [v for v in data.values() if isinstance(v, list)]
        data = arrays[0] if len(arrays) == 1 else data
    if not isinstance(data, list):
        raise LLMError(f"rerank answer is not a JSON array: {type(data).__name__}")
    out: list[int] = []
    for x in data:
        if isinstance(x, bool) or not isinstance(x, int | float) or int(x) != x:
            raise LLMError(f"rerank answer has a non-integer index {x!r}")
        i = int(x) - 1
        if 0 <= i < n and i not in out:
            out.append(i)
    return out


async def rerank(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    cfg = ctx.config.recall
    if not candidates:
        return Step(candidates, status="skipped: no candidates")
    llm, why = stage_llm(ctx, "rerank")
    if llm is None and not cfg.cross_encoder:
        return Step(candidates, status=f"skipped: {why}")
    if ctx.fast_path:
        return Step(candidates, status="skipped: fast path")
    if llm is None:
        return await _cross_encode(ctx, candidates)
    top = candidates[: cfg.rerank_top_n]
    try:
        answer = await llm.ask(
            ctx,
            question=ctx.request.query,
            reference_time=ctx.request.reference_time.date().isoformat(),
            candidates=render_candidates(top),
        )
        order = parse_indices(parse_json(answer.text), len(top))
    except LLMError as e:
        return Step(candidates, status=f"degraded: {e.reason}", prompt=llm.prompt.id)
    if not order:
        sharing = sum(1 for c in top if c.arm_scores.get("keyword", 0.0) > 0)
        if sharing:
            return Step(
                candidates,
                status=f"degraded: empty rerank while {sharing} candidate(s) share words with the question",
                prompt=answer.prompt_id,
            )
    chosen = [top[i] for i in order]
    return Step(
        chosen,
        detail={"shown": len(top), "chosen": [i + 1 for i in order], **answer.detail()},
        prompt=answer.prompt_id,
    )


@functools.cache
def _cross_encoder(path: str) -> CrossEncoder:
    from sentence_transformers import CrossEncoder  # here: seconds to import, and only this option needs it

    return CrossEncoder(path, device="cpu", local_files_only=True)


async def _cross_encode(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    path = ctx.config.recall.cross_encoder
    top = candidates[: ctx.config.recall.rerank_top_n]

    def score() -> list[float]:
        model = _cross_encoder(path)
        return [float(s) for s in model.predict([(ctx.request.query, c.memory.content) for c in top])]

    scores = await asyncio.to_thread(score)
    ranked = [c for _, c in sorted(zip(scores, top, strict=True), key=lambda p: -p[0])]
    return Step(ranked + candidates[len(top) :], detail={"implementation": f"cross-encoder {path}"})
