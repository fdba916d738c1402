"""Splitting what ``ingest`` receives into pieces: a conversation into turns, a document into chunks.

Token counts are cl100k_base, the encoding recall budgets with (``tokens.py``), so a chunk of
``max_tokens`` costs that much in a recall result.

- ``split_turns``: ``Speaker: text`` lines (a line that does not start with a speaker continues the
  turn before it), or an MCP client's message list as JSON (``[{"role": ..., "content": ...}]``,
  content a string or a list of text blocks).
- ``chunk_tokens``: sentences packed up to ``max_tokens``, cut at sentence ends and, when a chunk is
  at least half full, at paragraph ends; the last sentences of a chunk (up to ``overlap_tokens``)
  start the next one. A sentence longer than ``max_tokens`` is cut at token boundaries.
- ``chunk_semantic``: a new chunk starts where the cosine similarity of consecutive sentences drops
  below a threshold (or the chunk would pass ``max_tokens``); chunks under ``min_tokens`` are merged
  into a neighbour when the result fits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.providers.embedding.base import unit_rows
from memlane.pipeline.tokens import _encoding, count_tokens

# "Caroline: ...", "Dr. Smith: ...", "user: ...", "Speaker 2: ...": a name of at most four words
# (letters, digits, . ' -) and 40 characters before the colon. Times ("10:30") and URLs do not match.
_SPEAKER_RE = re.compile(r"^\s*([A-Za-z][\w.'\-]*(?: [\w.'\-]+){0,3})\s*:\s+(\S.*)$")
# Sentence ends: . ! ? (and a closing quote or bracket) followed by whitespace; or a line break.
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\n+")
_PARAGRAPH_RE = re.compile(r"\n\s*\n")


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str | None
    text: str


def split_turns(text: str) -> list[Turn]:
    """A conversation's turns, in order (see the module docstring for the accepted forms)."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, list):
            return _message_turns(data)
    turns: list[Turn] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _SPEAKER_RE.match(line)
        if m and len(m[1]) <= 40:
            turns.append(Turn(m[1].strip(), m[2].strip()))
        elif turns:
            prev = turns[-1]
            turns[-1] = Turn(prev.speaker, f"{prev.text}\n{line.strip()}")
        else:
            turns.append(Turn(None, line.strip()))
    return turns


def _message_turns(messages: list[Any]) -> list[Turn]:
    turns = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or "content" not in msg:
            raise InvalidInput(
                f"message {i} of the JSON list is not an object with 'role' and 'content'; give "
                '[{"role": "user", "content": "..."}, ...] or "Speaker: text" lines'
            )
        role = msg.get("role")
        if role is not None and not isinstance(role, str):
            raise InvalidInput(f"message {i}: role must be a string")
        content = msg["content"]
        if isinstance(content, str):
            body = content
        elif isinstance(content, list):
            parts = []
            for block in content:
                if isinstance(block, str):
                    parts.append(block)
                elif isinstance(block, dict) and block.get("type", "text") == "text":
                    if not isinstance(block.get("text"), str):
                        raise InvalidInput(f"message {i}: a text block needs a 'text' string")
                    parts.append(block["text"])
                # other blocks (images, tool calls) carry no text to remember
            body = "\n".join(parts)
        else:
            raise InvalidInput(f"message {i}: content must be a string or a list of text blocks")
        if body.strip():
            turns.append(Turn(role or None, body.strip()))
    return turns


def sentences(text: str) -> list[tuple[str, bool]]:
    """(sentence, ends a paragraph) in order; empty pieces dropped."""
    out: list[tuple[str, bool]] = []
    for para in _PARAGRAPH_RE.split(text):
        parts = [p.strip() for p in _SENTENCE_END_RE.split(para) if p and p.strip()]
        out.extend((p, i == len(parts) - 1) for i, p in enumerate(parts))
    return out


def _hard_split(sentence: str, max_tokens: int) -> list[str]:
    """A sentence longer than max_tokens, cut at token boundaries (re-counted, since decoding and
    re-encoding a cut can merge tokens differently)."""
    enc = _encoding()
    ids = enc.encode_ordinary(sentence)
    out, start = [], 0
    while start < len(ids):
        end = min(start + max_tokens, len(ids))
        piece = enc.decode(ids[start:end])
        while end - start > 1 and count_tokens(piece.strip()) > max_tokens:
            end -= 1
            piece = enc.decode(ids[start:end])
        if piece.strip():
            out.append(piece.strip())
        start = end
    return out


def _join(parts: Sequence[tuple[str, bool]]) -> str:
    """Sentences back into text: a paragraph end becomes a blank line."""
    text = ""
    for i, (s, para_end) in enumerate(parts):
        text += s
        if i < len(parts) - 1:
            text += "\n\n" if para_end else " "
    return text


def _units(text: str, max_tokens: int) -> list[tuple[str, bool]]:
    units: list[tuple[str, bool]] = []
    for s, para_end in sentences(text):
        if count_tokens(s) <= max_tokens:
            units.append((s, para_end))
        else:
            pieces = _hard_split(s, max_tokens)
            units.extend((p, para_end and i == len(pieces) - 1) for i, p in enumerate(pieces))
    return units


def chunk_tokens(text: str, max_tokens: int, overlap_tokens: int = 0) -> list[str]:
    """Chunks of at most ``max_tokens`` (cl100k_base), in order, cut at sentence ends (see module)."""
    if overlap_tokens >= max_tokens:
        raise ValueError("overlap_tokens must be below max_tokens")
    units = _units(text, max_tokens)
    chunks: list[str] = []
    current: list[tuple[str, bool]] = []
    fresh = 0  # sentences of `current` not carried over from the previous chunk

    def overlap_of(parts: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
        if not overlap_tokens:
            return []
        carried: list[tuple[str, bool]] = []
        for s in reversed(parts):
            if count_tokens(_join([s, *carried])) > overlap_tokens:
                break
            carried.insert(0, s)
        return carried

    for unit in units:
        if current and count_tokens(_join([*current, unit])) > max_tokens:
            chunks.append(_join(current))
            current = overlap_of(current)
            # the overlap plus this unit must still fit: drop carried sentences until it does
            while current and count_tokens(_join([*current, unit])) > max_tokens:
                current.pop(0)
            fresh = 0
        current.append(unit)
        fresh += 1
        # A paragraph end is a better cut than a sentence end: take it once the chunk is half full.
        if unit[1] and count_tokens(_join(current)) >= max_tokens // 2:
            chunks.append(_join(current))
            current, fresh = overlap_of(current), 0
    if current and fresh:
        chunks.append(_join(current))
    return chunks


def chunk_semantic(
    text: str,
    embed: Callable[[list[str]], list[list[float]]],
    *,
    threshold: float,
    max_tokens: int,
    min_tokens: int,
) -> list[str]:
    """Chunks cut where consecutive sentences stop being alike (see module); ``embed`` gives
    normalised vectors for a list of texts."""
    units = _units(text, max_tokens)
    if not units:
        return []
    vectors = unit_rows(embed([s for s, _ in units]))
    sims = np.sum(vectors[1:] * vectors[:-1], axis=1)
    groups: list[list[tuple[str, bool]]] = [[units[0]]]
    for unit, sim in zip(units[1:], sims, strict=True):
        if sim < threshold or count_tokens(_join([*groups[-1], unit])) > max_tokens:
            groups.append([unit])
        else:
            groups[-1].append(unit)
    # Merge small chunks into the previous one (or, for the first, the next) when the result fits.
    merged: list[list[tuple[str, bool]]] = []
    for g in groups:
        if merged and (count_tokens(_join(g)) < min_tokens or count_tokens(_join(merged[-1])) < min_tokens):
            if count_tokens(_join([*merged[-1], *g])) <= max_tokens:
                merged[-1] = [*merged[-1], *g]
                continue
        merged.append(g)
    return [_join(g) for g in merged]
