"""Stage 3, HyDE (Gao et al. 2022, "Precise Zero-Shot Dense Retrieval without Relevance Labels"):
embed a hypothetical answer as well as the question.

Needs an LLM; without one the question's own embedding is used.
"""

from __future__ import annotations

from .records import Query


def hypothesise(query: Query, llm) -> tuple[Query, str]:
    if llm is None:
        return query, "skipped: no LLM provider"
    raise NotImplementedError  # pragma: no cover - arrives with the LLM providers
