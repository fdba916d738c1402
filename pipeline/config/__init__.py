"""Typed configuration sections the engine reads.

Loading (TOML file, environment, precedence) lives in ``memlane.server.settings``; the engine
only sees these validated models. Every section forbids unknown keys, so a typo in the config
file is an error naming the key instead of a silently ignored setting.

One module per part of the engine (``database``, ``embedding``, ``llm``, ``recall``,
``temporal``, ``graph``, ``topics``, ``remember``; what they share in ``base``); here the root
``EngineConfig`` and the helpers that walk it. Every name is importable from this package, so
callers do not follow a section when it moves between modules. The descriptions are the one
place a setting is explained: docs/configuration.md and config.example.toml are generated from
them (``memlane.server.config_docs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, Field, SecretStr

from memlane.pipeline.config.base import Section, data_dir_of, default_data_dir
from memlane.pipeline.config.database import BackupConfig, DatabaseConfig
from memlane.pipeline.config.embedding import EmbeddingConfig
from memlane.pipeline.config.graph import GraphConfig
from memlane.pipeline.config.llm import (
    LLM_STAGES,
    LLMConfig,
    LLMProviderName,
    LLMStageConfig,
    LLMStagesConfig,
    ModelPrice,
    SupersedeStageConfig,
    TopicsStageConfig,
)
from memlane.pipeline.config.recall import (
    ARM_WEIGHTS,
    AdjustConfig,
    DecayConfig,
    RecallConfig,
    RecallSteps,
    RrfVectorWeights,
)
from memlane.pipeline.config.remember import (
    DEFAULT_EXCLUDE_PATTERNS,
    ChunkerConfig,
    FilterConfig,
    IngestConfig,
    RememberConfig,
)
from memlane.pipeline.config.temporal import TemporalConfig
from memlane.pipeline.config.topics import CustomTopic, SummariesConfig, TopicsConfig

__all__ = [
    "ARM_WEIGHTS",
    "DEFAULT_EXCLUDE_PATTERNS",
    "LLM_STAGES",
    "AdjustConfig",
    "BackupConfig",
    "ChunkerConfig",
    "CustomTopic",
    "DatabaseConfig",
    "DecayConfig",
    "EmbeddingConfig",
    "EngineConfig",
    "FilterConfig",
    "GraphConfig",
    "IngestConfig",
    "LLMConfig",
    "LLMProviderName",
    "LLMStageConfig",
    "LLMStagesConfig",
    "ModelPrice",
    "RecallConfig",
    "RecallSteps",
    "RememberConfig",
    "RrfVectorWeights",
    "Section",
    "SummariesConfig",
    "SupersedeStageConfig",
    "TemporalConfig",
    "TopicsConfig",
    "TopicsStageConfig",
    "data_dir_of",
    "default_data_dir",
    "masked_dump",
    "secret_fields",
]


class EngineConfig(Section):
    data_dir: Path | None = Field(
        default=None,
        description="Where the embedded database, the backups and the tokens file live. Unset: the "
        "platform's user data directory, ~/.local/share/memlane on Linux.",
        examples=["~/.local/share/memlane"],
    )
    default_project: str = Field(default="default", description="The project of a call that names none.")
    database: DatabaseConfig = DatabaseConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    llm: LLMConfig = LLMConfig()
    recall: RecallConfig = RecallConfig()
    remember: RememberConfig = RememberConfig()
    topics: TopicsConfig = TopicsConfig()
    summaries: SummariesConfig = SummariesConfig()
    temporal: TemporalConfig = TemporalConfig()
    chunker: ChunkerConfig = ChunkerConfig()
    filter: FilterConfig = FilterConfig()
    ingest: IngestConfig = IngestConfig()
    graph: GraphConfig = GraphConfig()
    backup: BackupConfig = BackupConfig()


def secret_fields(
    model: type[BaseModel] = EngineConfig, prefix: tuple[str, ...] = ()
) -> list[tuple[str, ...]]:
    """Paths of every ``SecretStr`` setting (``("database", "url")``...), found by type, so a new
    secret is refused in files and masked in reports without being listed anywhere else."""
    out: list[tuple[str, ...]] = []
    for name, f in model.model_fields.items():
        kinds = get_args(f.annotation) or (f.annotation,)
        if SecretStr in kinds:
            out.append((*prefix, name))
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                out.extend(secret_fields(kind, (*prefix, name)))
    return out


def masked_dump(config: BaseModel) -> dict[str, Any]:
    """The configuration as JSON-ready data, each secret replaced by whether it is set."""
    data = config.model_dump(mode="json")
    for path in secret_fields(type(config)):
        node, value = data, config
        for key in path[:-1]:
            node, value = node[key], getattr(value, key)
        secret = getattr(value, path[-1])
        node[path[-1]] = "set" if secret is not None and secret != [] else None
    return data
