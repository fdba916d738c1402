"""Stage 2, query synthesis: rewrite the question into several search queries.

Needs an LLM; without one the original question is the only query.
"""

from __future__ import annotations

from .records import Query
from .stage import Step, llm_unavailable


def synthesize(ctx, query: Query) -> Step[Query]:
    return llm_unavailable(ctx, query)
