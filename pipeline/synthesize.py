"""Stage 2, query synthesis: rewrite the question into several search queries.

Needs an LLM; without one the original question is the only query.
"""

from __future__ import annotations

from .records import Query


def synthesize(query: Query, llm) -> tuple[Query, str]:
    if llm is None:
        return query, "skipped: no LLM provider"
    raise NotImplementedError  # pragma: no cover - arrives with the LLM providers
