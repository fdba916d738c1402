"""Stage 7, relevance threshold: drop candidates with no real evidence of relevance."""

from __future__ import annotations

from .records import Candidate


def apply_floor(candidates: list[Candidate], min_similarity: float) -> list[Candidate]:
    """Keep every candidate that shares a word with the query (BM25 > 0); drop the others when their
    cosine similarity is under ``min_similarity``."""
    kept = []
    for c in candidates:
        if c.arm_scores.get("keyword", 0.0) > 0:
            kept.append(c)
            continue
        sim = c.arm_scores.get("vector")
        if sim is None or sim >= min_similarity:
            kept.append(c)
    return kept
