"""Reading LoCoMo conversations into turns and questions, exactly as the evaluation protocol says
(docs/benchmarks.md#the-evaluation-protocol-bench-locomo).

Only ``speaker_a/b``, ``session_N``, ``session_N_date_time`` and ``qa`` are read: the protocol
forbids the annotated/generated fields (events, observations, summaries) as input, so they are
never touched here.

Accepted inputs: a directory of per-conversation files (``26.json`` ... with the conversation's
fields at the top level, as in ``locomo10_v2``), one such file, or the release's
``data/locomo10.json`` (a list of ``{"sample_id", "conversation": {...}, "qa": [...]}``).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SESSION_RE = re.compile(r"^session_(\d+)$")
# "D8:6" and its known typos "D:11:26"; leading zeros are canonicalised away.
DIA_RE = re.compile(r"^D:?(\d+):(\d+)$")
EVIDENCE_SPLIT_RE = re.compile(r"[;,\s]+")

EVIDENCE_RULES = (
    "each evidence string is split on ';', ',' and whitespace ('D8:6; D9:17' is two ids); "
    "'D:11:26' is read as 'D11:26'; duplicates count once; a token that is no dialog id at all "
    "(e.g. a bare 'D') is dropped; a well-formed id that no turn has (e.g. 'D10:19' in a session "
    "with 16 turns) stays in the denominator, as the protocol says, and can never be found; a "
    "question whose evidence is empty after this is skipped and counted"
)
REFERENCE_TIME_RULE = (
    "the date of the last session that has turns (some files carry session_N_date_time keys for "
    "sessions without turns; those are ignored)"
)


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    content: str
    occurred_at: datetime
    also: tuple[str, ...] = ()  # a merged piece (``long_replies``): the other dia ids it holds

    @property
    def dia_ids(self) -> tuple[str, ...]:
        return (self.dia_id, *self.also)


@dataclass(frozen=True)
class Question:
    text: str
    category: int | None
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    last_session: int
    reference_time: datetime
    evidence_notes: Counter[str] = field(default_factory=Counter)


def parse_session_date(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08 13:56 UTC (the data has no zone; UTC like any
    zone-less date memlane receives)."""
    from dateutil import parser

    dt = parser.parse(text.replace(" on ", " "))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def turn_content(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("blip_caption")
    if caption:
        text += f" [shares a photo: {caption}]"
    return text


def parse_evidence(raw: list[Any], known: set[str], notes: Counter) -> tuple[str, ...]:
    """Clean one question's evidence list (see EVIDENCE_RULES); ``notes`` counts every repair."""
    out: list[str] = []
    for item in raw:
        parts = [p for p in EVIDENCE_SPLIT_RE.split(str(item)) if p]
        if len(parts) > 1:
            notes["split"] += 1
        for part in parts:
            m = DIA_RE.match(part)
            if not m:
                notes["dropped_malformed"] += 1
                continue
            canon = f"D{int(m[1])}:{int(m[2])}"
            if canon != part:
                notes["normalised"] += 1
            if canon in out:
                notes["duplicates"] += 1
                continue
            if canon not in known:
                notes["unknown_kept"] += 1
            out.append(canon)
    return tuple(out)


def _sessions(conv: dict[str, Any]) -> list[int]:
    """Session numbers that have turns, in order."""
    nums = [int(m[1]) for k in conv if (m := SESSION_RE.match(k))]
    return sorted(n for n in nums if isinstance(conv[f"session_{n}"], list) and conv[f"session_{n}"])


def parse_conversation(name: str, conv: dict[str, Any]) -> Conversation:
    sessions = _sessions(conv)
    if not sessions:
        raise ValueError(f"conversation {name} has no session_N turns")
    turns: list[Turn] = []
    for n in sessions:
        when = parse_session_date(conv[f"session_{n}_date_time"])
        for t in conv[f"session_{n}"]:
            turns.append(Turn(dia_id=t["dia_id"], session=n, content=turn_content(t), occurred_at=when))
    known = {t.dia_id for t in turns}
    notes: Counter[str] = Counter()
    questions = []
    for qa in conv.get("qa", []):
        if not qa.get("evidence"):
            continue
        evidence = parse_evidence(qa["evidence"], known, notes)
        if not evidence:
            notes["questions_skipped"] += 1
            continue
        questions.append(Question(text=qa["question"], category=qa.get("category"), evidence=evidence))
    last = sessions[-1]
    return Conversation(
        name=name,
        turns=turns,
        questions=questions,
        last_session=last,
        reference_time=parse_session_date(conv[f"session_{last}_date_time"]),
        evidence_notes=notes,
    )


def _samples(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, flat conversation dict) for every conversation in one JSON file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    items = data if isinstance(data, list) else [data]
    out = []
    for i, item in enumerate(items):
        if "conversation" in item:  # the release's locomo10.json layout
            flat = {**item["conversation"], "qa": item.get("qa", [])}
            name = str(item.get("sample_id") or f"{path.stem}-{i}")
        else:
            flat = item
            name = path.stem if len(items) == 1 else f"{path.stem}-{i}"
        out.append((name, flat))
    return out


def load_conversations(path: str | Path) -> list[Conversation]:
    """Every conversation under ``path`` (a directory of *.json, or one file), sorted by name."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.json"))
        if not files:
            raise FileNotFoundError(f"no *.json conversation files in {path}")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"{path} does not exist")
    convs = [parse_conversation(name, conv) for f in files for name, conv in _samples(f)]
    return sorted(convs, key=lambda c: c.name)


LONG_MIN_WORDS, LONG_MAX_WORDS = 200, 600
SHAPE_RULE = (
    "long-replies: in each session, a turn as it is, then the turns after it merged into one piece "
    f"('Speaker: text' lines) of at least {LONG_MIN_WORDS} words and, where a turn allows, at most "
    f"{LONG_MAX_WORDS}, alternating; a piece holds every dia id it merged, so evidence in it is found "
    "when the piece is"
)


def long_replies(conv: Conversation) -> Conversation:
    """The same conversation in the shape of a chat with long replies (``SHAPE_RULE``): short turns
    alternating with pieces of 200-600 words, as an assistant's long answers are. The questions and
    their evidence are the same; only how the text is cut into memories changes."""
    out: list[Turn] = []
    by_session: dict[int, list[Turn]] = {}
    for t in conv.turns:
        by_session.setdefault(t.session, []).append(t)
    for turns in by_session.values():
        i = 0
        while i < len(turns):
            out.append(turns[i])  # the short turn
            i += 1
            block: list[Turn] = []
            words = 0
            while i < len(turns) and words < LONG_MIN_WORDS:
                n = len(turns[i].content.split())
                if block and words + n > LONG_MAX_WORDS:
                    break
                block.append(turns[i])
                words += n
                i += 1
            if block:
                out.append(
                    Turn(
                        dia_id=block[0].dia_id,
                        session=block[0].session,
                        content="\n".join(t.content for t in block),
                        occurred_at=block[0].occurred_at,
                        also=tuple(t.dia_id for t in block[1:]),
                    )
                )
    return replace(conv, turns=out)
