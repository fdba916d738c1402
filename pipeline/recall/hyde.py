"""Stage 3, HyDE (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"):
a short hypothetical memory that would answer the question, embedded as one more query for the arms
that search by embedding.

Needs an LLM; without one the question's own embedding is used. A reply that is a refusal, junk,
the question again or off its topic (``pipeline/llm/replies.py``) degrades the stage: the
question's embedding is used.
"""

from __future__ import annotations

from dataclasses import replace

from memlane.pipeline.llm.replies import junk, on_topic, repeats
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step, stage_llm
from memlane.pipeline.records import Query

MAX_CHARS = 1200


def unusable(text: str, question: str) -> str | None:
    """Why a hypothetical memory is not worth searching with (``pipeline/llm/replies.py``): a
    refusal or junk, too short, the question again, or nothing on the question's topic."""
    why = junk(text)
    if why is not None:
        return why
    if len(text) < 10:
        return f"reply too short ({text[:40]!r})"
    if repeats(text, question):
        return "the reply repeats the question"
    if not on_topic([text], question):
        return f"the reply shares no word with the question ({text[:60]!r})"
    return None


async def hypothesise(ctx: RecallContext, query: Query) -> Step[Query]:
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
    unfit = unusable(text, query.text)
    if unfit is not None:
        return Step(query, status=f"degraded: {unfit}", prompt=answer.prompt_id)
    return Step(
        replace(query, hypothetical=text),
        detail={"hypothetical": text, **answer.detail()},
        prompt=answer.prompt_id,
    )
