"""What every recall stage receives: one typed context instead of the whole engine."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import UUID

import numpy as np

from memlane.pipeline.llm.service import Usage
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.records import Trace

if TYPE_CHECKING:
    from memlane.pipeline.config import EngineConfig
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.providers.embedding.base import Embedder
    from memlane.pipeline.recall.assemble import HandlesReadAhead
    from memlane.pipeline.records import Memory
    from memlane.pipeline.store import Store

Vector = list[float]
AccessStats = dict[UUID, tuple[int, datetime | None]]  # Store.access_stats
Centroids = dict[tuple[str, str], np.ndarray]  # Store.category_centroids


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class CentroidsRead:
    """Stage 8's offline category match read: the (project, category) pairs asked for, and the read."""

    pairs: frozenset[tuple[str, str]]
    read: asyncio.Future[Centroids]


@dataclass(slots=True)
class ReadAheads:
    """Reads a later stage needs, started early so that they run beside the stages before it. Each
    belongs to the one stage that awaits it; the recall cancels what is left when it ends."""

    # The question's embedding (its vectors: the question alone), started before stage 1 when no
    # LLM can add a text to embed; retrieval awaits it (``run.py``).
    question: asyncio.Future[list[Vector]] | None = None
    # Stage 8's access statistics of the candidates read without them, started after stage 4.
    access: asyncio.Future[AccessStats] | None = None
    # Stage 8's category centroids, started after stage 4.
    centroids: CentroidsRead | None = None
    # Stage 9's handles of the memories it will likely take, read during stage 8.
    handles: HandlesReadAhead | None = None
    # Stage 8's instructions and preferences with their cosines, read while the arms search.
    instructions: asyncio.Future[list[tuple[Memory, float | None]]] | None = None

    def cancel(self) -> None:
        reads = (
            self.question,
            self.access,
            self.centroids.read if self.centroids else None,
            self.instructions,
        )
        for read in reads:
            if read is not None:
                read.cancel()
        if self.handles is not None:
            self.handles.cancel()


@dataclass(slots=True)
class RecallContext:
    config: EngineConfig
    store: Store
    embedder: Embedder
    llm: LLMService | None
    request: RecallQuery
    clock: Callable[[], datetime] = utc_now  # the wall clock; the question's "now" is request.reference_time
    trace: Trace = field(default_factory=Trace)
    usage: Usage = field(default_factory=Usage)  # LLM calls and tokens of this recall
    deadline: float | None = None  # time.monotonic() by which LLM stages must be done
    fast_path: bool = False  # set by intent routing: no synthesis, HyDE or rerank
    reads: ReadAheads = field(default_factory=ReadAheads)
    # The question's vector, as retrieval embedded it: stage 8's category match compares it with
    # the categories' centroids.
    question_vector: Vector | None = None

    def remaining_s(self) -> float | None:
        """Seconds left before the recall deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()
