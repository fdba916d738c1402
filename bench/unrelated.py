"""Questions that no memory answers (bench/unrelated.txt): general knowledge and other
domains, asked against each LoCoMo conversation's project. A good recall returns nothing for them
(the relevance floor must not pad the answer with the least bad memories)."""

from __future__ import annotations

from importlib.resources import files
from statistics import fmean
from typing import Any

from memlane.bench.common import percentiles
from memlane.pipeline.recall import render
from memlane.pipeline.tokens import count_tokens


def load_questions() -> list[str]:
    text = files("memlane.bench").joinpath("unrelated.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def delivered_tokens(result) -> int:
    """Tokens of the recall result as an MCP client's model reads it (the tool's text block)."""
    return count_tokens(render.to_text(result.rendered))


async def ask(engine, ingested, *, limit: int) -> dict[str, Any]:
    """Every unrelated question against every conversation's project; memories returned per recall."""
    questions = load_questions()
    returned: list[int] = []
    tokens: list[int] = []
    for ing in ingested:
        for q in questions:
            result = await engine.recall(
                {
                    "query": q,
                    "project": ing.project,
                    "limit": limit,
                    "reference_time": ing.conv.reference_time,
                    "count_accesses": False,
                }
            )
            returned.append(len(result.memories))
            tokens.append(delivered_tokens(result))
    return {
        "questions": len(questions),
        "projects": len(ingested),
        "recalls": len(returned),
        "limit": limit,
        "mean_memories": round(fmean(returned), 3) if returned else None,
        "share_with_memories": round(sum(1 for n in returned if n) / len(returned), 3) if returned else None,
        "max_memories": max(returned, default=0),
        "tokens_delivered": {"mean": round(fmean(tokens), 1) if tokens else None, **percentiles(tokens)},
    }
