"""Stage 6, rerank: reorder the fused candidates with a stronger model.

Needs an LLM (or a cross-encoder, later); without one the fused order is kept.
"""

from __future__ import annotations

from .records import Candidate
from .stage import Step, llm_unavailable


def rerank(ctx, candidates: list[Candidate]) -> Step[list[Candidate]]:
    return llm_unavailable(ctx, candidates)
