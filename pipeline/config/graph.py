"""``[graph]``: the memory graph's links and the graph retrieval arm."""

from __future__ import annotations

from pydantic import Field

from memlane.pipeline.config.base import Section


class GraphConfig(Section):
    """The memory graph: links made on the write path (migration 0006) and the graph arm's reach."""

    relates_to_k: int = Field(
        default=5, ge=0, le=50, description="relates_to links from a new memory to its nearest earlier ones."
    )
    relates_to_min_similarity: float = Field(
        default=0.5, ge=-1.0, le=1.0, description="Cosine similarity a relates_to link needs."
    )
    same_time_k: int = Field(
        default=3, ge=0, le=50, description="same_time links from a memory to others of its day (bounded)."
    )
    sequence_gap_s: float = Field(
        default=10800.0,
        ge=0.0,
        description="A memory remembered without a source continues the sequence of the one its client "
        "remembered before it in the project (linked with next) when the two were stored, and happened, "
        "at most this many seconds apart; 0: never.",
    )
    decay: float = Field(
        default=0.8, gt=0.0, le=1.0, description="Spreading activation: share of activation kept per hop."
    )
    causes_boost: float = Field(
        default=1.5, ge=0.0, le=10.0, description="Spreading activation: factor on causes links."
    )
    entry_points: int = Field(
        default=10,
        ge=1,
        le=200,
        description="Top keyword hits the graph arm starts from (the fused hits of the other arms when "
        "the keyword arm found none).",
    )
    # More than recall.candidates_per_arm: the hits no store arm returned are most of the graph's
    # recall, and with as few as the store arms' it lost recall on LoCoMo with long replies.
    max_hits: int = Field(
        default=30,
        ge=1,
        le=1000,
        description="Most memories the graph arm adds to a recall's candidates (at least the recall's "
        "limit and graph.entry_points).",
    )
    expand_low: int = Field(default=10, ge=1, le=10000, description="Nodes expanded at recall budget low.")
    expand_mid: int = Field(default=30, ge=1, le=10000, description="Nodes expanded at recall budget mid.")
    expand_high: int = Field(default=100, ge=1, le=10000, description="Nodes expanded at recall budget high.")
    max_entity_degree: int = Field(
        default=200,
        ge=1,
        description="An entity mentioned by more memories than this is not expanded (too common to "
        "say anything, e.g. the user's own name).",
    )
    # The development set's R@k is the same at 50; at 15 the arm reads half the rows (an entity's
    # members, a memory's incoming links) at 10k memories.
    per_node: int = Field(default=15, ge=1, le=1000, description="Neighbours loaded per expanded node.")

    def expand(self, budget: str) -> int:
        return {"low": self.expand_low, "mid": self.expand_mid, "high": self.expand_high}.get(
            budget, self.expand_mid
        )
