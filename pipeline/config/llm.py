"""``[llm]`` and its per-stage overrides ``[llm.stages.<stage>]``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from memlane.pipeline.config.base import Section

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
    provider: LLMProviderName | None = Field(
        default=None, description="Default: [llm] provider.", examples=["openai"]
    )
    model: str | None = Field(default=None, description="Default: [llm] model.", examples=["gpt-4o-mini"])
    prompt_version: int | None = Field(
        default=None,
        ge=1,
        description="Default: the newest version (`memlane prompts list`).",
        examples=[1],
    )


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
    intent: LLMStageConfig = Field(
        default=LLMStageConfig(),
        description="Recall's stage 1, intent analysis: the LLM refines the offline analyser's record.",
    )
    synthesis: LLMStageConfig = Field(
        default=LLMStageConfig(),
        description="Recall's stage 2, query synthesis: alternative search queries (none offline).",
    )
    hyde: LLMStageConfig = Field(
        default=LLMStageConfig(),
        description="Recall's stage 3, HyDE: a hypothetical memory that would answer the question, "
        "embedded as one more query (offline: the question's own embedding only).",
    )
    rerank: LLMStageConfig = Field(
        default=LLMStageConfig(),
        description="Recall's stage 6, rerank of the top recall.rerank_top_n fused candidates "
        "(offline: recall.cross_encoder when set, else the fused order).",
    )
    category_match: LLMStageConfig = Field(
        default=LLMStageConfig(enabled=False),
        description="Stage 8's category boost by LLM: it rates how well the question matches each "
        "candidate's category. Off unless enabled: one more LLM call per recall (offline, the "
        "question's cosine to each category's centroid is used).",
    )
    category_summary: LLMStageConfig = Field(
        default=LLMStageConfig(),
        description="Category summaries, written by `memlane maintain --task summaries` (never during "
        "recall or remember).",
    )
    extract: LLMStageConfig = Field(
        default=LLMStageConfig(enabled=False),
        description="remember: entities and causes links from an LLM, added after the memory is stored. "
        "Off unless enabled: one LLM call per new memory is a cost a configured [llm] should not start "
        "paying silently.",
    )
    topics: TopicsStageConfig = Field(
        default=TopicsStageConfig(enabled=False),
        description="remember: topic names and fact types from an LLM, refining the offline ones. Off "
        "unless enabled: one LLM call per remembered batch (of up to 20 memories).",
    )
    supersede: SupersedeStageConfig = Field(
        default=SupersedeStageConfig(enabled=False),
        description="remember: whether a new statement replaces, adds to or contradicts the stored ones "
        "about its subject. Off unless enabled: one LLM call per new short statement that has "
        "candidates; off, and when a call fails, the offline detector decides.",
    )


class ModelPrice(Section):
    input_per_mtok: float = Field(ge=0, description="Currency units per million input tokens.")
    output_per_mtok: float = Field(ge=0, description="Currency units per million output tokens.")


class LLMConfig(Section):
    """The LLM behind stages 1, 2, 3 and 6. "none": every stage uses its offline implementation or
    is skipped, and the trace says which."""

    provider: LLMProviderName = Field(
        default="none",
        description="Where the LLM stages send their calls: none; anthropic; openai; openai-compatible "
        "(Ollama, vLLM, LM Studio, Groq, OpenRouter...: set base_url and model); or sampling, the MCP "
        "client's own model, for clients that declare the sampling capability (deprecated by the "
        "2026-07-28 MCP spec, so never the default).",
    )
    model: str | None = Field(
        default=None,
        description="Model name; default per provider (anthropic: claude-haiku-4-5, openai: gpt-4o-mini); "
        "openai-compatible needs one.",
        examples=["claude-haiku-4-5"],
    )
    base_url: str | None = Field(
        default=None,
        description="openai-compatible: the server's /v1 URL (Ollama, vLLM, LM Studio...).",
        examples=["http://127.0.0.1:11434/v1"],
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
        default_factory=dict,
        description="Per model, to report cost next to token usage.",
        examples=[{"claude-haiku-4-5": {"input_per_mtok": 1.0, "output_per_mtok": 5.0}}],
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
