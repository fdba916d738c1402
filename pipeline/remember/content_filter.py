"""The content filter: what ``ingest`` keeps, and the one check explicit ``remember`` shares with it.

A piece (a turn without its speaker prefix, or a chunk) is dropped when it is shorter than
``filter.min_chars`` or longer than ``filter.max_chars``, when it is wholly one of
``filter.exclude_patterns`` (acknowledgements: "ok", "thanks!", "got it", "lol"), or when its score

    density_weight * density + cue_weight * cue + specific_weight * specific

is under ``filter.autosave_threshold``, where

- density: unique informative words (neither stopwords nor among the most frequent words of English,
  as recall's relevance floor reads them) over ``filter.density_words``, capped at 1;
- cue: 1 when it states an action or decision ("we decided", "I will", "let's", "deadline", "agreed");
- specific: 1 when it holds a number, a date or a name (a capitalised word inside a sentence).

Explicit ``remember`` is the caller's own choice of what to keep: it is only refused when its whole
content matches an exclude pattern (``check_remember``), with the pattern named.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from memlane.pipeline.config import EngineConfig, FilterConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall.threshold import informative_words

_CUE_RE = re.compile(
    r"\b(we|i|you|they|he|she)\s+(decided|agreed|chose|picked|will|'ll|are going to|am going to|plan to|"
    r"need to|must|have to|should)\b|\b(i'll|we'll|you'll|let's|lets|let us|decided|decision|agreed|"
    r"deadline|due (by|on|date)|action item|todo|to-do|follow up|remind me|don't forget|remember to|"
    r"going forward|from now on|next step|plan is|promise)\b",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(r"\d")
_MONTHS = (
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday yesterday tomorrow tonight today "
    "week weekend month year"
).split()
_DATE_RE = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b", re.IGNORECASE)
_WORD_RE = re.compile(r"\S+")
_CAPITALISED_RE = re.compile(r"^[\"'(\[]*([A-Z][a-z]+|[A-Z]{2,})\b")


def _has_name(text: str) -> bool:
    """A capitalised word that does not start a sentence: "... went to Paris", "... with Melanie"."""
    words = _WORD_RE.findall(text)
    return any(
        _CAPITALISED_RE.match(w) and not prev.endswith((".", "!", "?", ":", '"'))
        for prev, w in zip(words, words[1:], strict=False)
    )


_EDGE_PUNCT = " \t\r\n.,!?;:-~*_\"'()[]…👍🙂😊😀😂❤️"


@dataclass(frozen=True, slots=True)
class Verdict:
    keep: bool
    reason: str | None  # why it was dropped, in words
    score: float
    rule: str | None = None  # which check dropped it: exclude_pattern, too_short, too_long, low_information


@functools.cache
def _compiled(patterns: tuple[str, ...]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((p, re.compile(p, re.IGNORECASE)) for p in patterns)


_SEGMENT_SPLIT_RE = re.compile(r"[,.!?;:…]+\s*|\s+-+\s+")


def excluded_by(text: str, cfg: FilterConfig) -> str | None:
    """The exclude pattern that ``text`` wholly matches (surrounding spaces and punctuation ignored),
    or, for a run of acknowledgements ("Perfect, thank you so much!", "ok, got it."), the pattern of
    its first part: every part must match one."""
    compiled = _compiled(tuple(cfg.exclude_patterns))
    if not compiled:
        return None
    core = text.strip(_EDGE_PUNCT).strip()
    for pattern, rx in compiled:
        if rx.fullmatch(core) or rx.fullmatch(text.strip()):
            return pattern
    parts = [p.strip(_EDGE_PUNCT).strip() for p in _SEGMENT_SPLIT_RE.split(core)]
    parts = [p for p in parts if p]
    if len(parts) < 2:
        return None
    matched = []
    for part in parts:
        hit = next((pattern for pattern, rx in compiled if rx.fullmatch(part)), None)
        if hit is None:
            return None
        matched.append(hit)
    return matched[0]


def score(text: str, cfg: FilterConfig, common_rank: int) -> float:
    density = min(1.0, len(informative_words(text, common_rank)) / cfg.density_words)
    cue = 1.0 if _CUE_RE.search(text) else 0.0
    specific = 1.0 if (_NUMBER_RE.search(text) or _DATE_RE.search(text) or _has_name(text)) else 0.0
    return cfg.density_weight * density + cfg.cue_weight * cue + cfg.specific_weight * specific


def judge(text: str, config: EngineConfig) -> Verdict:
    """Whether ``ingest`` keeps a piece (its text without a speaker prefix)."""
    cfg = config.filter
    body = text.strip()
    pattern = excluded_by(body, cfg)
    if pattern is not None:
        return Verdict(False, f"matches exclude pattern {pattern!r}", 0.0, "exclude_pattern")
    if len(body) < cfg.min_chars:
        return Verdict(False, f"too short ({len(body)} < filter.min_chars {cfg.min_chars})", 0.0, "too_short")
    if len(body) > cfg.max_chars:
        return Verdict(False, f"too long ({len(body)} > filter.max_chars {cfg.max_chars})", 0.0, "too_long")
    s = score(body, cfg, config.recall.informative_token_rank)
    if s < cfg.autosave_threshold:
        return Verdict(
            False,
            f"low information (score {s:.2f} < filter.autosave_threshold {cfg.autosave_threshold})",
            s,
            "low_information",
        )
    return Verdict(True, None, s)


def check_remember(content: str, config: EngineConfig) -> None:
    """Explicit remember: refuse content that is wholly an exclude pattern (nothing to remember)."""
    pattern = excluded_by(content, config.filter)
    if pattern is not None:
        raise InvalidInput(
            f"content {content.strip()[:40]!r} is only an acknowledgement (it matches filter.exclude_patterns "
            f"{pattern!r}); remember the fact itself in a full sentence, or change filter.exclude_patterns"
        )
