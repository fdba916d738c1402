"""Stage 2, query synthesis: 2-3 alternative search queries on the exact topic of the question
(its specific terms and their synonyms, never broader categories), one more query each for the
keyword and vector arms.

Needs an LLM; without one the question is the only query. A reply that is a refusal, junk or
off the question's topic (``pipeline/llm/replies.py``) degrades the stage: the question stays the
only query.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

from memlane.pipeline.llm.replies import check_reply, junk, on_topic, repeats
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step, stage_llm
from memlane.pipeline.records import Query

MAX_VARIANTS = 3
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def _json_strings(text: str) -> list[str] | None:
    """The queries of a reply written as a JSON array of strings, which some models prefer."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and value and all(isinstance(x, str) for x in value):
        return value
    return None


def parse_variants(text: str, question: str) -> tuple[str, ...]:
    """One query per line; numbering, bullets and quotes dropped, the question itself, repeats and
    junk lines (``llm/replies.py``) left out. Raises LLMError when the reply is a refusal or junk,
    nothing usable remains, or no variant shares a word with the question (one variant of
    synonyms only is kept when another is on the topic)."""
    lines = _json_strings(text)
    if lines is None:
        if text.strip():
            check_reply(text)
        lines = text.splitlines()
    out: list[str] = []
    seen = {question.strip().lower()}
    for line in lines:
        q = _BULLET.sub("", line).strip().strip('"').strip("'").strip()
        if not q or len(q) > 300 or q.lower() in seen or q.endswith(":"):
            continue
        if junk(q) is not None or repeats(q, question):
            continue
        seen.add(q.lower())
        out.append(q)
    if not out:
        raise LLMError(f"no usable query in the reply {text.strip()[:60]!r}")
    out = out[:MAX_VARIANTS]
    if not on_topic(out, question):
        raise LLMError(f"no query variant on the question's topic: {out[0][:60]!r}")
    return tuple(out)


async def synthesize(ctx: RecallContext, query: Query) -> Step[Query]:
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
