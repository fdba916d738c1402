"""``[temporal]``: time expressions in questions and the temporal retrieval arm."""

from __future__ import annotations

from pydantic import Field

from memlane.pipeline.config.base import Section


class TemporalConfig(Section):
    """The time-expression parser and the temporal retrieval arm (pipeline/time/parser.py,
    pipeline/time/arm.py). The arm's boost is its fusion weight, ``recall.arm_weights.temporal``."""

    enabled: bool = Field(
        default=True,
        description="Run the temporal arm when the question names a time range; false: never (the intent "
        "stage still shows the parsed range).",
    )
    recent_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="'recently', 'lately': this many days before the reference time.",
    )
    candidates: int = Field(
        default=50, ge=1, le=1000, description="In-range memories the arm returns (the best by similarity)."
    )
    max_scan: int = Field(
        default=5000,
        ge=1,
        le=1_000_000,
        description="In-range memories the arm scores at most (the latest), so a wide range on a large "
        "project stays bounded.",
    )
    event_min_similarity: float = Field(
        default=0.3,
        ge=-1.0,
        le=1.0,
        description="'the week before <event>': the memory that anchors the event needs at least this "
        "cosine similarity with the event phrase, else the range is not placed.",
    )
