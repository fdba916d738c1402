"""Stage 3, HyDE (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"):
embed a hypothetical answer as well as the question.

Needs an LLM; without one the question's own embedding is used.
"""

from __future__ import annotations

from .records import Query
from .stage import Step, llm_unavailable


def hypothesise(ctx, query: Query) -> Step[Query]:
    return llm_unavailable(ctx, query)
