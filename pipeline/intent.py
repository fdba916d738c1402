"""Stage 1, intent analysis: what kind of question is this (factual, temporal, preference...)?

Needs an LLM; without one the stage is skipped and retrieval treats every query alike.
"""

from __future__ import annotations

from .records import Query
from .stage import Step, llm_unavailable


def analyse(ctx, query: Query) -> Step[Query]:
    return llm_unavailable(ctx, query)
