"""What every recall stage receives: one typed context instead of the whole engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .records import RecallRequest, Trace

if TYPE_CHECKING:
    from .config import EngineConfig
    from .providers.embedder import Embedder
    from .providers.llm import LLM
    from .store import Store


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class RecallContext:
    config: EngineConfig
    store: Store
    embedder: Embedder
    llm: LLM | None
    request: RecallRequest
    arms: tuple[str, ...] | None = None  # None: every registered arm (the ablation passes a subset)
    clock: Callable[[], datetime] = utc_now  # the wall clock; the question's "now" is request.reference_time
    trace: Trace = field(default_factory=Trace)
