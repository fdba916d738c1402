"""Stage 3, HyDE (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"):
a short hypothetical memory that would answer the question, embedded as one more query for the arms
that search by embedding.

Needs an LLM; without one the question's own embedding is used.
"""

from __future__ import annotations

from dataclasses import replace

from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.stage import Step, stage_llm
from memlane.pipeline.records import Query

MAX_CHARS = 1200


async def hypothesise(ctx, query: Query) -> Step[Query]:
    llm, why = stage_llm(ctx, "hyde")
    if llm is None:
        return Step(query, status=f"skipped: {why}")
    try:
        answer = await llm.ask(
            ctx,
            question=query.text,
            reference_time=ctx.request.reference_time.date().isoformat(),
        )
    except LLMError as e:
        return Step(query, status=f"degraded: {e.reason}", prompt=llm.prompt.id)
    text = " ".join(answer.text.split())[:MAX_CHARS]
    if len(text) < 10:
        return Step(
            query, status=f"degraded: reply too short ({answer.text.strip()[:40]!r})", prompt=answer.prompt_id
        )
    return Step(
        replace(query, hypothetical=text),
        detail={"hypothetical": text, **answer.detail()},
        prompt=answer.prompt_id,
    )
