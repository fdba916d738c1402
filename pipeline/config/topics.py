"""``[topics]`` and ``[summaries]``: what remember files a memory under, and what a category says
of itself."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from memlane.pipeline.config.base import Section


class CustomTopic(Section):
    """One fixed topic: ``"name"`` alone, or a table with a description and keywords."""

    name: str = Field(min_length=1, max_length=64, description="Short, lower case: it may become a category.")
    description: str = Field(default="", max_length=500, description="What belongs in it, in a few words.")
    keywords: list[str] = Field(
        default_factory=list, description="Words that put a memory in this topic when they occur in it."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return v.strip().lower()


class TopicsConfig(Section):
    """Topics and fact types assigned when memories are stored (pipeline/remember/topics.py, facttypes.py)."""

    enabled: bool = Field(
        default=True,
        description="Assign topics and a fact type on remember (a memory's first topic becomes its "
        "category when the caller gave none). false: neither is assigned.",
    )
    taxonomy: Literal["auto", "fixed", "hybrid"] = Field(
        default="hybrid",
        description="fixed: only custom_topics; auto: topics named after a noun phrase of a memory; hybrid: "
        "custom_topics first, an automatic topic when none fits.",
    )
    custom_topics: list[CustomTopic] = Field(
        default_factory=list,
        description='Fixed topics: names ("travel") or tables {name, description, keywords}.',
        examples=[
            ["travel", "health"],
            [
                {
                    "name": "database",
                    "description": "databases, SQL, schemas, migrations",
                    "keywords": ["postgres", "sql", "migration"],
                }
            ],
        ],
    )
    max_topics_per_entry: int = Field(
        default=3, ge=1, le=10, description="At most this many topics a memory."
    )
    min_confidence: float = Field(
        default=0.2,
        ge=-1.0,
        le=2.0,
        description="A fixed topic fits when the cosine similarity of the memory to its name and "
        "description, plus keyword_weight if one of its keywords occurs, is at least this.",
    )
    keyword_weight: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Added to a topic's confidence when one of its keywords occurs.",
    )
    auto_min_similarity: float = Field(
        default=0.45,
        ge=-1.0,
        le=1.0,
        description="An automatic topic is reused when the memory's cosine similarity to its centroid "
        "(the mean of its members) is at least this; otherwise a new one is named after the memory's first noun phrase.",
    )
    max_auto_topics: int = Field(
        default=200, ge=0, le=100000, description="Automatic topics per project; past it none is created."
    )

    @field_validator("custom_topics", mode="before")
    @classmethod
    def _names_or_tables(cls, v: Any) -> Any:
        if isinstance(v, list):
            v = [{"name": t} if isinstance(t, str) else t for t in v]
        return v

    @field_validator("custom_topics")
    @classmethod
    def _unique(cls, v: list[CustomTopic]) -> list[CustomTopic]:
        names = [t.name for t in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"custom topic(s) named twice: {', '.join(twice)}")
        return v


class SummariesConfig(Section):
    """Category summaries (pipeline/remember/summaries.py)."""

    key_terms: int = Field(default=8, ge=1, le=50, description="Key terms kept per category.")
    extract_memories: int = Field(
        default=2,
        ge=1,
        le=10,
        description="Offline summary: this many of the category's most central memories.",
    )
    refresh_fraction: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="A summary is refreshed when read once this share of its category's memories changed "
        "since the last refresh (0: after any change); `memlane maintain --task summaries` refreshes all.",
    )
