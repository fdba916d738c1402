"""Stage 1, intent analysis: what kind of question is this (factual, temporal, preference...)?

Needs an LLM; without one the stage is skipped and retrieval treats every query alike.
"""

from __future__ import annotations

from .records import Query


def analyse(query: Query, llm) -> tuple[Query, str]:
    if llm is None:
        return query, "skipped: no LLM provider"
    raise NotImplementedError  # pragma: no cover - arrives with the LLM providers
