"""What the tools return: typed models, so clients get structured output with a schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from memlane.pipeline.records import Memory, Remembered


class MemoryOut(BaseModel):
    id: str
    content: str
    score: float | None = Field(default=None, description="Relevance (recall only); higher is better.")
    project: str
    category: str | None
    tags: list[str]
    pinned: bool
    priority: int
    occurred_at: str | None
    created_at: str
    updated_at: str
    expires_at: str | None
    metadata: dict[str, Any]
    topics: list[str] | None = Field(default=None, description="Best first; null until assigned.")
    fact_type: str | None = Field(
        default=None, description="world, experience or opinion; null until assigned."
    )

    @classmethod
    def of(cls, m: Memory, score: float | None = None) -> MemoryOut:
        return cls(
            id=str(m.id),
            content=m.content,
            score=round(score, 6) if score is not None else None,
            project=m.project,
            category=m.category,
            tags=list(m.tags),
            pinned=m.pinned,
            priority=m.priority,
            occurred_at=m.occurred_at.isoformat() if m.occurred_at else None,
            created_at=m.created_at.isoformat(),
            updated_at=m.updated_at.isoformat(),
            expires_at=m.expires_at.isoformat() if m.expires_at else None,
            metadata=m.metadata,
            topics=list(m.topics) if m.topics is not None else None,
            fact_type=m.fact_type,
        )


class RememberResult(BaseModel):
    id: str
    status: str = Field(description="'created', or 'duplicate' when this exact memory was already stored.")
    project: str

    @classmethod
    def of(cls, r: Remembered) -> RememberResult:
        return cls(id=str(r.id), status=r.status, project=r.project)


def _no_null_defaults(schema: dict[str, Any]) -> None:
    """Optional fields are omitted, never null: the schema should not advertise a null default."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class MemoryView(BaseModel):
    """One recalled memory as the client's model reads it (``memlane.pipeline.render``): optional
    fields are left out when absent, never sent as null."""

    model_config = ConfigDict(json_schema_extra=_no_null_defaults)

    id: str = Field(
        description="Handle: the shortest start of the memory's id that is unique in the store (at "
        "least 8 hex digits); update and forget accept it. The full id with explain=true."
    )
    content: str
    date: str = Field(description="When it happened (occurred_at), else when it was stored: YYYY-MM-DD.")
    category: str | SkipJsonSchema[None] = None
    tags: list[str] | SkipJsonSchema[None] = None
    pinned: bool | SkipJsonSchema[None] = Field(default=None, description="Present (true) only when pinned.")
    priority: int | SkipJsonSchema[None] = Field(
        default=None, description="1 (low) to 5 (critical); present only when not the default 3."
    )
    project: str | SkipJsonSchema[None] = Field(
        default=None, description="Present only when a recall spans several projects."
    )
    metadata: dict[str, Any] | SkipJsonSchema[None] = None
    topics: list[str] | SkipJsonSchema[None] = Field(
        default=None, description="Its topics, best first; left out when it is just the category."
    )
    fact_type: str | SkipJsonSchema[None] = Field(
        default=None,
        description="experience or opinion; left out for world (a fact about the world or others).",
    )
    score: float | SkipJsonSchema[None] = Field(
        default=None, description="Fused relevance, higher is better (explain=true only)."
    )


class RecallResult(BaseModel):
    model_config = ConfigDict(json_schema_extra=_no_null_defaults)

    memories: list[MemoryView] = Field(description="Best first; empty when nothing relevant is stored.")
    tokens_used: int = Field(
        description="Tokens (cl100k_base) of this whole result as compact JSON, this number included; "
        "never more than max_tokens (the explain trace is not counted)."
    )
    note: str | SkipJsonSchema[None] = Field(
        default=None, description="Present when no memory is returned: why, and what to do."
    )
    trace: dict[str, Any] | SkipJsonSchema[None] = Field(
        default=None, description="Per-stage timings and counts (explain=true)."
    )


class ForgetResult(BaseModel):
    id: str
    status: str
    content: str
