"""What the tools return: typed models, so clients get structured output with a schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

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
        )


class RememberResult(BaseModel):
    id: str
    status: str = Field(description="'created', or 'duplicate' when this exact memory was already stored.")
    project: str

    @classmethod
    def of(cls, r: Remembered) -> RememberResult:
        return cls(id=str(r.id), status=r.status, project=r.project)


class RecallResult(BaseModel):
    memories: list[MemoryOut]
    tokens_used: int = Field(description="Tokens (cl100k_base) the returned contents take.")
    trace: dict[str, Any] | None = Field(
        default=None, description="Per-stage timings and counts (explain=true)."
    )


class ForgetResult(BaseModel):
    id: str
    status: str
    content: str
