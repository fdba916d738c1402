"""Stage 2, query synthesis: 2-3 alternative search queries on the exact topic of the question
(its specific terms and their synonyms, never broader categories), one more query each for the
keyword and vector arms.

Needs an LLM; without one the question is the only query.
"""

from __future__ import annotations

import re
from dataclasses import replace

from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.stage import Step, stage_llm
from memlane.pipeline.records import Query

MAX_VARIANTS = 3
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def parse_variants(text: str, question: str) -> tuple[str, ...]:
    """One query per line; numbering, bullets and quotes dropped, the question itself and repeats
    left out. Raises LLMError when nothing usable remains."""
    out: list[str] = []
    seen = {question.strip().lower()}
    for line in text.splitlines():
        q = _BULLET.sub("", line).strip().strip('"').strip("'").strip()
        if not q or len(q) > 300 or q.lower() in seen or q.endswith(":"):
            continue
        seen.add(q.lower())
        out.append(q)
    if not out:
        raise LLMError(f"no usable query in the reply {text.strip()[:60]!r}")
    return tuple(out[:MAX_VARIANTS])


async def synthesize(ctx, query: Query) -> Step[Query]:
    llm, why = stage_llm(ctx, "synthesis")
    if llm is None:
        return Step(query, status=f"skipped: {why}")
    try:
        answer = await llm.ask(ctx, question=query.text)
        variants = parse_variants(answer.text, query.text)
    except LLMError as e:
        return Step(query, status=f"degraded: {e.reason}", prompt=llm.prompt.id)
    return Step(
        replace(query, variants=variants),
        detail={"variants": list(variants), **answer.detail()},
        prompt=answer.prompt_id,
    )
