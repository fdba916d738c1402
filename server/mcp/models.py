"""What the tools return: typed models, so clients get structured output with a schema."""

from __future__ import annotations

from dataclasses import fields
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field, model_serializer
from pydantic.json_schema import SkipJsonSchema

from memlane.pipeline.records import Memory, Remembered, Replaced


def _drop_absent(self, handler):
    data = handler(self)
    for name in ("redacted", "superseded_by", "valid_until", "conflicts_with", "event_start", "event_end"):
        if name in data and data[name] is None:
            data.pop(name)
    return data


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
        default=None,
        description="world, experience, opinion, instruction or preference; null until assigned.",
    )
    superseded_by: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Present on a memory that is no longer current: the memory stating its newer value.",
    )
    valid_until: str | SkipJsonSchema[None] = Field(
        default=None, description="Present with superseded_by: when the newer value started."
    )
    conflicts_with: list[str] | SkipJsonSchema[None] = Field(
        default=None,
        description="Present when it contradicts other memories and nothing says which is right.",
    )
    event_start: str | SkipJsonSchema[None] = Field(
        default=None,
        description='Present when its content names a time ("yesterday", "last month"): its start, '
        "resolved against occurred_at.",
    )
    event_end: str | SkipJsonSchema[None] = Field(
        default=None, description="Present with event_start: the end of that time (exclusive)."
    )

    _serialize = model_serializer(mode="wrap")(_drop_absent)

    @classmethod
    def of(cls, m: Memory, score: float | None = None) -> MemoryOut:
        """The memory's fields this model has (``Memory``'s names), as JSON has them: ids as
        strings, times in ISO 8601, tuples as lists."""
        shown = {name: _as_json(getattr(m, name)) for name in cls.model_fields if name in _MEMORY_FIELDS}
        return cls(**shown, score=round(score, 6) if score is not None else None)


_MEMORY_FIELDS = frozenset(f.name for f in fields(Memory))


def _as_json(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple):
        return list(value)
    return value


class Redaction(BaseModel):
    kind: str = Field(
        description="What was found: openai_key, aws_access_key, private_key, jwt, url_password..."
    )
    count: int


class ReplacedMemory(BaseModel):
    id: str
    content: str
    date: str = Field(description="When its value started: occurred_at, else when it was stored.")

    @classmethod
    def of(cls, r: Replaced) -> ReplacedMemory:
        return cls(id=str(r.id), content=r.content, date=r.date.isoformat())


class SimilarMemory(BaseModel):
    id: str
    similarity: float = Field(description="Cosine similarity to the new memory (1 = same meaning).")


class RememberResult(BaseModel):
    model_config = ConfigDict(json_schema_extra=lambda s: _no_null_defaults(s))

    id: str
    status: str = Field(description="'created', or 'duplicate' when this exact memory was already stored.")
    project: str
    redacted: list[Redaction] | SkipJsonSchema[None] = Field(
        default=None,
        description="Present when likely secrets were replaced by [REDACTED:kind] before storing "
        "([remember] secrets).",
    )

    _serialize = model_serializer(mode="wrap")(_drop_absent)

    similar: list[SimilarMemory] = Field(
        default_factory=list,
        description="Stored memories of the project that say nearly the same (filter.novelty_threshold), "
        "most similar first. The new memory was stored anyway: if it corrects or replaces one of them, "
        "update that one and forget this one.",
    )

    supersedes: list[ReplacedMemory] = Field(
        default_factory=list,
        description="Stored memories this one states a newer value of (same subject and attribute): "
        "marked superseded by it, kept for questions about the past; recall answers with this one.",
    )
    conflicts: list[ReplacedMemory] = Field(
        default_factory=list,
        description="Stored memories this one contradicts where nothing says which is newer: both "
        "kept; ask the user which is right.",
    )
    superseded_by: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Present when a stored memory already states a newer value (this one is dated "
        "earlier): stored as its past.",
    )

    @classmethod
    def of(cls, r: Remembered) -> RememberResult:
        redacted = [Redaction(kind=k, count=n) for k, n in r.redacted] or None
        return cls(
            id=str(r.id),
            status=r.status,
            project=r.project,
            redacted=redacted,
            similar=[SimilarMemory(id=str(i), similarity=s) for i, s in r.similar],
            supersedes=[ReplacedMemory.of(x) for x in r.supersedes],
            conflicts=[ReplacedMemory.of(x) for x in r.conflicts],
            superseded_by=str(r.superseded_by) if r.superseded_by is not None else None,
        )


def _no_null_defaults(schema: dict[str, Any]) -> None:
    """Optional fields are omitted, never null: the schema should not advertise a null default."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class ContextItem(BaseModel):
    id: str = Field(description="Handle of the neighbouring memory (8 hex digits).")
    content: str
    position: int | None = Field(description="Its position in the source, when it has one.")


class HistoryItem(BaseModel):
    id: str = Field(description="Handle of the earlier version (8 hex digits).")
    content: str
    date: str = Field(description="When its value started: YYYY-MM-DD.")
    valid_until: str = Field(description="When the next version replaced it: YYYY-MM-DD.")


class EntityFacts(BaseModel):
    name: str
    facts: list[str] = Field(description="Other memories that mention it, latest first.")


class MemoryView(BaseModel):
    """One recalled memory as the client's model reads it (``memlane.pipeline.recall.render``): optional
    fields are left out when absent, never sent as null."""

    model_config = ConfigDict(json_schema_extra=_no_null_defaults)

    id: str = Field(
        description="Handle: the shortest start of the memory's id that is unique in the store (at "
        "least 8 hex digits); update and forget accept it. The full id with explain=true."
    )
    content: str
    date: str = Field(description="When it happened (occurred_at), else when it was stored: YYYY-MM-DD.")
    event: str | SkipJsonSchema[None] = Field(
        default=None,
        description='The time its content names ("yesterday", "last month") when another day than '
        "date: YYYY-MM-DD, or a span YYYY-MM-DD..YYYY-MM-DD.",
    )
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
        description="experience, opinion, instruction or preference; left out for world (a fact about "
        "the world or others).",
    )
    kind: str | SkipJsonSchema[None] = Field(
        default=None,
        description='"instruction": a standing instruction or preference of the user that applies to '
        "this request: follow it in the answer.",
    )
    score: float | SkipJsonSchema[None] = Field(
        default=None, description="Final relevance, higher is better (explain=true only)."
    )
    adjustments: dict[str, float] | SkipJsonSchema[None] = Field(
        default=None,
        description="The scoring adjustments' factors on the score: decay, priority, pinned, category, "
        "project (explain=true only).",
    )
    context: list[ContextItem] | SkipJsonSchema[None] = Field(
        default=None,
        description="include_context=true: the memory's previous and next neighbours in its source.",
    )
    superseded_by: str | SkipJsonSchema[None] = Field(
        default=None,
        description="Present when a newer memory states its newer value: that memory's handle. "
        "Not current: it answers what was true before valid_until.",
    )
    valid_until: str | SkipJsonSchema[None] = Field(
        default=None, description="With superseded_by: when the newer value started (YYYY-MM-DD)."
    )
    conflict: list[str] | SkipJsonSchema[None] = Field(
        default=None,
        description="Present when it contradicts other memories and nothing says which is right: "
        "their handles. Ask the user which holds.",
    )
    history: list[HistoryItem] | SkipJsonSchema[None] = Field(
        default=None,
        description="include_history=true: the earlier versions this memory replaced, newest first.",
    )


class RecallResult(BaseModel):
    model_config = ConfigDict(json_schema_extra=_no_null_defaults)

    memories: list[MemoryView] = Field(description="Best first; empty when nothing relevant is stored.")
    tokens_used: int = Field(
        description="Tokens (cl100k_base) of this whole result as compact JSON, this number included; "
        "never more than max_tokens (the explain trace is not counted)."
    )
    entities: list[EntityFacts] | SkipJsonSchema[None] = Field(
        default=None,
        description="include_entities=true: other key facts about the entities the memories mention.",
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


class UpdateResult(MemoryOut):
    """The memory as updated, and the secrets its new content or metadata had redacted."""

    model_config = ConfigDict(json_schema_extra=lambda s: _no_null_defaults(s))

    redacted: list[Redaction] | SkipJsonSchema[None] = Field(
        default=None, description="Present when likely secrets were replaced by [REDACTED:kind]."
    )

    _serialize = model_serializer(mode="wrap")(_drop_absent)


class IngestPiece(BaseModel):
    model_config = ConfigDict(json_schema_extra=_no_null_defaults)

    position: int = Field(description="The piece's index in the input (its position in the source).")
    status: str = Field(description="'stored', 'duplicate' (of duplicate_of) or 'filtered' (reason).")
    turn: int | SkipJsonSchema[None] = Field(
        default=None, description="conversation: the turn it comes from."
    )
    id: str | SkipJsonSchema[None] = Field(default=None, description="stored: the new memory's id.")
    duplicate_of: str | SkipJsonSchema[None] = Field(
        default=None, description="duplicate: the memory it matched (stored before, or by this call)."
    )
    similarity: float | SkipJsonSchema[None] = None
    reason: str | SkipJsonSchema[None] = Field(default=None, description="filtered: why.")
    preview: str = Field(description="The start of the piece's text.")


class IngestCounts(BaseModel):
    pieces: int
    stored: int
    duplicate: int
    filtered: int


class IngestResultOut(BaseModel):
    project: str
    source: str = Field(description="The source every piece was stored under (given or generated).")
    kind: str
    counts: IngestCounts
    pieces: list[IngestPiece]
