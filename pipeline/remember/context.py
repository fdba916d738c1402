"""What every write step receives: one typed context instead of the whole engine.

The engine builds a ``WriteContext`` for each remember, ingest, update or maintain call, so a step
sees the configuration, store and models as they are at that call (the benchmark swaps the LLM
service between runs), and none of them imports the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memlane.pipeline.llm.service import Usage

if TYPE_CHECKING:
    from memlane.pipeline.config import EngineConfig
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.providers.embedding.embedders import Embedder
    from memlane.pipeline.remember.topics import Topics
    from memlane.pipeline.remember.topics_llm import TopicsLLM
    from memlane.pipeline.store import Store


@dataclass(frozen=True, slots=True)
class WriteContext:
    config: EngineConfig
    store: Store
    embedder: Embedder
    topics: Topics  # offline topics and fact types; ``topics.enabled`` follows ``[topics] enabled``
    llm: LLMService | None = None  # None: no stage can use an LLM, every write step runs offline
    topics_llm: TopicsLLM | None = None  # the ``topics`` LLM stage, when it serves this write


@dataclass(slots=True)
class LLMBudget:
    """What ``StageLLM.ask`` reads of its context, for a call outside a recall: the usage it adds
    to, and its time bound (None: the provider's own timeout, there is no recall deadline)."""

    usage: Usage = field(default_factory=Usage)
    timeout_s: float | None = None

    def remaining_s(self) -> float | None:
        return self.timeout_s
