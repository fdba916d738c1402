"""What every recall stage receives: one typed context instead of the whole engine."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memlane.pipeline.llm.service import Usage
from memlane.pipeline.records import RecallRequest, Trace

if TYPE_CHECKING:
    from memlane.pipeline.config import EngineConfig
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.providers.embedding.base import Embedder
    from memlane.pipeline.store import Store


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class RecallContext:
    config: EngineConfig
    store: Store
    embedder: Embedder
    llm: LLMService | None
    request: RecallRequest
    arms: tuple[str, ...] | None = None  # None: every registered arm (the ablation passes a subset)
    clock: Callable[[], datetime] = utc_now  # the wall clock; the question's "now" is request.reference_time
    trace: Trace = field(default_factory=Trace)
    usage: Usage = field(default_factory=Usage)  # LLM calls and tokens of this recall
    deadline: float | None = None  # time.monotonic() by which LLM stages must be done
    fast_path: bool = False  # set by intent routing: no synthesis, HyDE or rerank
    adjustments: bool = True  # stage 8 on (the benchmark's ablation switches it off)
    query_embedding: Any = None  # the question's embedding, kept by retrieval for stage 8
    access_read: Any = None  # stage 8's read of the candidates' access statistics, started after stage 4
    handles: Any = None  # stage 9's handle lookup, read ahead during stage 8 (assemble.HandlesReadAhead)
    # Stage 8's offline category match read, started after stage 4: (the pairs asked for, the task).
    centroids_read: Any = None
    # The question's embedding, started with stage 1 when no stage can add a text to embed (no LLM
    # for synthesis or HyDE): the future of ``embed_texts`` for ``[request.query]``, or None.
    question_embedding: Any = None

    def remaining_s(self) -> float | None:
        """Seconds left before the recall deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - time.monotonic()
