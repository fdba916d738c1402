"""Stage 7, relevance threshold: drop candidates with no real evidence of relevance."""

from __future__ import annotations

from .records import Candidate


def apply_floor(candidates: list[Candidate], min_similarity: float) -> list[Candidate]:
    """Keep keyword matches (they share a word with the query); drop candidates that only the vector
    arm found and whose cosine similarity is under ``min_similarity``."""
    kept = []
    for c in candidates:
        if "keyword" in c.ranks:
            kept.append(c)
            continue
        sim = c.arm_scores.get("vector")
        if sim is None or sim >= min_similarity:
            kept.append(c)
    return kept
