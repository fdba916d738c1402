"""What every write step receives: one typed context instead of the whole engine.

The engine builds a ``WriteContext`` for each remember, ingest, update or maintain call, so a step
sees the configuration, store and models as they are at that call (the benchmark swaps the LLM
service between runs), and none of them imports the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memlane.pipeline.config import EngineConfig
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.providers.embedding.base import Embedder
    from memlane.pipeline.remember.topics import Topics
    from memlane.pipeline.remember.topics_llm import TopicsLLM
    from memlane.pipeline.store import Store
    from memlane.pipeline.supersession.judge import SupersedeLLM


@dataclass(frozen=True, slots=True)
class WriteContext:
    config: EngineConfig
    store: Store
    embedder: Embedder
    topics: Topics  # offline topics and fact types; ``topics.enabled`` follows ``[topics] enabled``
    llm: LLMService | None = None  # None: no stage can use an LLM, every write step runs offline
    topics_llm: TopicsLLM | None = None  # the ``topics`` LLM stage, when it serves this write
    supersede_llm: SupersedeLLM | None = None  # the ``supersede`` LLM stage, when it serves this write
