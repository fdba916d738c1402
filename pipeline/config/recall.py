"""``[recall]`` with its tables: fusion (``rrf_vector``), stage 8's time decay and other
adjustments."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from memlane.pipeline.config.base import Section

# The retrieval arms a config may weigh, in the registry's order, with their default fusion weights.
# The schema names them so a config file is checked without importing the stages;
# pipeline/recall/arms.py declares what each arm is and runs.
ARM_WEIGHTS: dict[str, float] = {"vector": 1.0, "keyword": 1.0, "graph": 0.5, "temporal": 0.7}


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
        examples=[{"incident": 14.0, "preference": 365.0}],
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


class RecallSteps(Section):
    """Stage 8's reorderings after its factors (``STAGE8_STEPS`` in pipeline/recall/run.py), each
    switched on or off alone; the trace says ``skipped`` for one switched off."""

    current_first: bool = Field(
        default=True,
        description="What is current first: a person's own facts, a newer statement of a fact and a "
        "superseded memory's successor above the older (a question about the past keeps the order).",
    )
    echoes: bool = Field(
        default=True, description="A user's statement above the assistant's reply that echoes it."
    )
    coverage: bool = Field(
        default=True,
        description="An overview or order question's first answers spread over the candidates' days "
        "(time order for an order question).",
    )
    instructions: bool = Field(
        default=True,
        description="The standing instructions and preferences that apply, brought in after the first "
        "answers (how many: instructions_max).",
    )


# Old names of recall settings, still read (TOML and MEMLANE_ variables) with a warning.
RECALL_RENAMED = {
    "directives_max": "instructions_max",
    "directive_min_similarity": "instruction_min_similarity",
}


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
    instructions_max: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Standing instructions and preferences a recall adds where they apply (0: none). "
        "Formerly directives_max (still read, with a warning).",
    )
    instruction_min_similarity: float = Field(
        default=0.4,
        ge=-1.0,
        le=1.0,
        description="An instruction or preference applies to a request when the cosine of the request "
        'to its text, or to its condition ("when I ask about ..."), is at least this. Formerly '
        "directive_min_similarity (still read, with a warning).",
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
        examples=["/path/to/cross-encoder"],
    )

    decay: DecayConfig = Field(
        default_factory=DecayConfig,
        description="Time decay; `decay = false` (or true) is short for the table's `enabled`.",
    )
    adjust: AdjustConfig = AdjustConfig()
    steps: RecallSteps = RecallSteps()

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not RECALL_RENAMED.keys() & data.keys():
            return data
        data = dict(data)
        for old, new in RECALL_RENAMED.items():
            if old in data:
                warnings.warn(f"recall.{old} is deprecated: use recall.{new}", FutureWarning, stacklevel=2)
                value = data.pop(old)
                data.setdefault(new, value)  # the new name wins when both are set
        return data

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
