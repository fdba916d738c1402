"""The write path's limits and cuts: ``[remember]``, ``[ingest]``, ``[chunker]``, ``[filter]``."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from memlane.pipeline.config.base import Section


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


class IngestConfig(Section):
    max_input_chars: int = Field(
        default=1_000_000,
        ge=1,
        description="Longest text one ingest call takes (characters); longer input is refused: split it.",
    )
    max_pieces: int = Field(
        default=10000, ge=1, description="Most pieces (turns and chunks) one ingest call may produce."
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
