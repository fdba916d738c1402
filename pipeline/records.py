"""Plain, frozen records passed between the stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID


@dataclass(frozen=True, slots=True)
class Memory:
    id: UUID
    project: str
    content: str
    category: str | None
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    pinned: bool
    priority: int
    occurred_at: datetime | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    source: str | None
    position: int | None = None  # order within its source (a turn, a chunk); migration 0005
    topics: tuple[str, ...] | None = None  # best first; None: not assigned yet (migration 0007)
    fact_type: str | None = None  # world, experience or opinion; None: not assigned yet
    superseded_by: UUID | None = None  # the memory that states its newer value (migration 0013)
    valid_until: datetime | None = None  # when that newer value starts
    conflicts_with: tuple[UUID, ...] | None = None  # memories it contradicts, neither known right
    event_start: datetime | None = None  # the time its content names ("yesterday"); migration 0014
    event_end: datetime | None = None  # (exclusive)
    # The fields above are the memories table's columns, in store/rows.py's order; these are not
    # (and are given by name).
    access_count: int = field(default=0, kw_only=True)  # recalls that returned it (memory_access)
    last_accessed_at: datetime | None = field(default=None, kw_only=True)
    # The two above were read with the memory (else: not read, not zero).
    access_known: bool = field(default=False, kw_only=True)

    @property
    def valid_from(self) -> datetime:
        """When it was said to hold: when it happened if known, else when it was stored. Which of
        two statements is newer goes by this (supersession, recall's order)."""
        return self.occurred_at or self.created_at

    @property
    def began(self) -> datetime:
        """When its value started to hold: ``valid_from``, or earlier when its content names an
        earlier time ("we moved to Berlin last month"). A recall ``as_of`` a time reads this."""
        said = self.valid_from
        return self.event_start if self.event_start is not None and self.event_start < said else said

    def happened_in(self, start: datetime | None, end: datetime | None) -> bool:
        """Whether it was said, or its event time falls, within [start, end) (None: open)."""
        if (
            self.occurred_at is not None
            and (start is None or self.occurred_at >= start)
            and (end is None or self.occurred_at < end)
        ):
            return True
        return (
            self.event_start is not None
            and self.event_end is not None
            and (end is None or self.event_start < end)
            and (start is None or self.event_end > start)
        )


@dataclass(frozen=True, slots=True)
class Remembered:
    """What remember did with one memory."""

    id: UUID
    status: str  # "created", or "duplicate" when this exact memory was already stored
    project: str
    redacted: tuple[tuple[str, int], ...] = ()  # (kind, count) of secrets replaced before storing
    # Stored memories of the project at or above filter.novelty_threshold (id, cosine similarity),
    # most similar first: the new memory was stored anyway; the caller may prefer ``update``.
    similar: tuple[tuple[UUID, float], ...] = ()
    # Stored memories this one states a newer value of: marked superseded by it (nothing deleted).
    supersedes: tuple[Replaced, ...] = ()
    # Stored memories it contradicts where nothing says which is right: both kept, both marked.
    conflicts: tuple[Replaced, ...] = ()
    # A stored memory that states a newer value of this one (it was dated earlier): this one is
    # stored as superseded.
    superseded_by: UUID | None = None


@dataclass(frozen=True, slots=True)
class Replaced:
    """A stored memory a new one superseded or contradicts, as remember reports it."""

    id: UUID
    content: str
    date: datetime  # when its value started: occurred_at, else when it was stored


@dataclass(slots=True)
class Candidate:
    """A memory on its way through recall, with what each arm said about it."""

    memory: Memory
    score: float = 0.0
    arm_scores: dict[str, float] = field(default_factory=dict)  # arm -> raw score (cosine, BM25)
    base_score: float | None = None  # the score before stage 8 (None: the adjustments did not run)
    adjustments: dict[str, float] = field(default_factory=dict)  # stage 8: factor -> multiplier


@dataclass(slots=True)
class StageTrace:
    stage: str
    ms: float
    count_in: int
    count_out: int
    status: str  # "ran", "skipped: <why>", "degraded: <why>" or "failed: <why>"
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Trace:
    stages: list[StageTrace] = field(default_factory=list)
    route: str | None = None  # "fast" or "full", and why
    llm: dict[str, Any] = field(default_factory=dict)  # calls and tokens of this recall
    wall_ms: float | None = None  # the whole recall; stages 1-3 overlap, so not the sum of stages
    read: dict[str, Any] = field(default_factory=dict)  # with read replicas: read_from, read_wait_ms

    @property
    def total_ms(self) -> float:
        return self.wall_ms if self.wall_ms is not None else sum(s.ms for s in self.stages)

    def as_dict(self) -> dict[str, Any]:
        return {
            "total_ms": round(self.total_ms, 3),
            **({"route": self.route} if self.route else {}),
            **({"llm": self.llm} if self.llm else {}),
            **self.read,
            "stages": [
                {
                    "stage": s.stage,
                    "ms": round(s.ms, 3),
                    "in": s.count_in,
                    "out": s.count_out,
                    "status": s.status,
                    **({"detail": s.detail} if s.detail else {}),
                }
                for s in self.stages
            ],
        }


class QueryIntent(Protocol):
    """What the stages after it read of intent analysis's record (``recall/intent.py``'s ``Intent``,
    which this bottom layer may not import): the route's complexity and where the record came from,
    and the names and terms the question mentions (the graph arm's question entities). The temporal
    arm also reads its time ranges (``time/arm.py``), of the time parser's type, a layer above."""

    @property
    def complexity(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def entities(self) -> tuple[str, ...]: ...


@dataclass(frozen=True, slots=True)
class Query:
    """What retrieval searches with: the original question plus any synthesised variants."""

    text: str
    variants: tuple[str, ...] = ()
    hypothetical: str | None = None  # HyDE answer, when an LLM wrote one
    intent: QueryIntent | None = None  # intent.Intent, from stage 1


@dataclass(slots=True)
class Recalled:
    """What a recall found: the memories it returns, best first, and how it got there."""

    memories: list[tuple[Memory, float]]
    ranked: list[Candidate]  # the final order before token packing (what the benchmark scores)
    tokens_used: int
    trace: Trace
    deferred: bool = False  # an LLM stage waits for the MCP client's model: call again with its answers
    # The order stage 7 (the relevance threshold) was given, its first 50 ids: what it dropped can be
    # measured (the benchmark's evidence lost at stage 7).
    before_threshold: tuple[UUID, ...] = ()
    rendered: dict[str, Any] = field(default_factory=dict)  # what the client's model reads (render.py)


def stable_key(m: Memory) -> tuple[str, float]:
    """Tie-breaker that is the same in every run and every store (ids are random): the content, then
    when it happened (undated first). Every sort of candidates computes it for each of them, a few
    hundred per recall: a timestamp, not an ISO string (which took 13% of a recall's Python time)."""
    return (m.content, m.occurred_at.timestamp() if m.occurred_at else float("-inf"))
