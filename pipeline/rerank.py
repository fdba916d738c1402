"""Stage 6, rerank: reorder the fused candidates with a stronger model.

Needs an LLM (or a cross-encoder, later); without one the fused order is kept.
"""

from __future__ import annotations

from .records import Candidate


def rerank(query: str, candidates: list[Candidate], llm) -> tuple[list[Candidate], str]:
    if llm is None:
        return candidates, "skipped: no LLM provider"
    raise NotImplementedError  # pragma: no cover - arrives with the LLM providers
