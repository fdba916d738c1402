"""Stage 7, relevance threshold: keep only candidates with evidence of relevance, so a question the
store knows nothing about gets nothing instead of the least bad memories.

A candidate is evidence when it

- has a cosine similarity of at least ``recall.semantic_min_similarity`` with the question (the
  meaning alone is convincing), or
- shares an *informative* word with the question and has a cosine of at least
  ``recall.word_min_similarity`` (a shared rare word, not a chance one in an unrelated text).

A word is informative unless it is a stopword or one of the most frequent words of English, read
from the cl100k_base tokenizer the budget already uses: its merges were learned in frequency order,
so a word that is a single token with an id under ``recall.informative_token_rank`` is a very
common word ("time", "point", "year", "first", "many"). Words match on a shared stem-like prefix
("painted" and "painting").

A turn next to a kept memory in its conversation (same source, one position away) that the graph
arm reached strongly (activation 0.5 or more) is kept with a cosine of at least
``recall.min_similarity``: the answer to a question is often the turn after the one with its words.

Both cosine floors that a shared word relaxes shrink for a long memory (``length_factor``): its
cosine with a short question is diluted by everything else it says. On a chat whose replies are
200-600 words, the best keyword hit of a question, sharing its rare word, had cosines of 0.08-0.11
and was dropped.

A candidate in the time range the question names (the temporal arm, ``pipeline/time/arm.py``)
that matches a keyword of the question or shares an informative word with it is kept with a cosine
of at least ``recall.min_similarity``; and when nothing else is kept, every candidate in the range
that matches a keyword is, whatever its cosine (a short question with a date in it has a weak cosine
with the very memory it asks for: "what incidents did we have in May 2024?" and "Incident: the
payment webhook timed out" had 0.09), so such a question is never answered with nothing. A question that is only a time is one whose informative
words, once its time expressions are removed, are only words for "whatever happened" ("what
happened last week?", "what went wrong in April?", "what did I do the first week of April?",
"anything new?"): every candidate in its range is kept, whatever its cosine, so it is never
answered with nothing while the range has memories.

Besides that: the base rule (no shared word at all and a cosine under ``recall.min_similarity``:
dropped) and a relative floor (a fused score under ``recall.relative_floor`` times the best one:
dropped; not for the range of a question that is only a time). When nothing is left, recall says
so instead of padding the answer.

Then the order: for a question that is only a time, the kept candidates in its range come first,
each group in the fused (or reranked) order; stage 8 keeps that order unless its factors disagree
strongly (``base_scores``). A question on a topic and a time keeps the fused order, where the
range is a boost (``recall.arm_weights.temporal``).

Calibrated offline (MiniLM) on the LoCoMo development set (997 questions) and 54 unrelated
questions (bench/unrelated.txt) asked against each of its 5 conversations, limit 20: with
the defaults, recall at 1 to 20 is what it is without the floor (it removes distractors as well as
the odd evidence memory), and 79% of unrelated questions get nothing.

Why these defaults and not the best fit. The development questions name the speaker, which lifts
every cosine; on a small store of developer notes, relevant memories without a shared rare word
scored 0.19-0.31 ("which editor does the user like?" / "The user prefers Neovim ...": 0.31) and
unrelated questions about 0.02. So semantic_min_similarity is not set at the development set's
optimum but at the 90th percentile of the best cosine of unrelated questions there (0.28), which
keeps them under one memory on average with a margin. word_min_similarity and the token rank are
flat over a wide range. The relative floor is a guard for fused scores far apart and must stay
low: higher, it removes evidence memories from the top 20.
"""

from __future__ import annotations

from datetime import datetime

from memlane.pipeline.config import RecallConfig
from memlane.pipeline.records import Candidate
from memlane.pipeline.time.parser import parse, strip_expressions
from memlane.pipeline.words import STOPWORDS, WORD, shares_word, token_rank


def informative_words(text: str, common_rank: int) -> frozenset[str]:
    """The words of ``text`` that are neither stopwords nor among the most frequent words."""
    return frozenset(
        w for w in WORD.findall(text.lower()) if w not in STOPWORDS and token_rank(w) >= common_rank
    )


# A long memory's cosine with a short question is diluted by everything else it says (the embedding
# pools every token, and sees only the first 256): past this many words, the floors that a shared
# word relaxes (min_similarity, word_min_similarity) shrink with the square root of its length. The
# floors were calibrated on chat turns, most under it.
REFERENCE_WORDS = 40


def length_factor(content: str) -> float:
    """1 for a memory of up to ``REFERENCE_WORDS`` words, then sqrt(REFERENCE_WORDS / words)."""
    n = len(content.split())
    return 1.0 if n <= REFERENCE_WORDS else (REFERENCE_WORDS / n) ** 0.5


_ANY_TIME = datetime(2000, 1, 1)  # only the phrases of the time expressions are used
# Words that ask for whatever happened, not for something in particular ("what happened in June?",
# "what went wrong last week?", "what did I work on in April?"): a question whose informative words
# are only these asks for the time. Every form is listed; only the informative ones matter.
_ANY_EVENT = frozenset(
    """happen happens happened happening occur occurs occurred occurring go goes going gone went
    wrong new news do does did done doing up on anything everything something stuff thing things
    event events activity activities busy notable interesting important worth remember remembered
    work works worked working change changes changed take took place""".split()
)


def _in_range(c: Candidate) -> bool:
    return c.arm_scores.get("temporal", 0.0) > 0


def time_only(query: str, cfg: RecallConfig) -> bool:
    """Whether ``query`` asks for a time and nothing else: without its time expressions, its
    informative words are only words for "whatever happened" (``_ANY_EVENT``)."""
    ranges = parse(query, _ANY_TIME)
    if not ranges:
        return False
    rest = informative_words(strip_expressions(query, ranges), cfg.informative_token_rank)
    return not rest - _ANY_EVENT


def in_range_first(kept: list[Candidate]) -> list[Candidate]:
    """For a question that is only a time: ``kept`` with the candidates in its range moved before
    the others, each group in its order; the range is all it asks for. A question on a topic and a
    time keeps the fused order, where the range is a boost (``recall.arm_weights.temporal``):
    moving the range first there too cost 0.02 at R@10 on the LoCoMo development set, whose
    questions' names match most memories of a range."""
    return [c for c in kept if _in_range(c)] + [c for c in kept if not _in_range(c)]


# A conversation answers over two turns: the question's words in one, the answer in the next ("what
# was the reading about?" / "it was about ..."), which shares no word and has a weak cosine. Such a
# turn is kept when the graph reached it strongly and it is next to a memory kept on its own.
CONTEXT_MIN_GRAPH = 0.5


def _with_context(candidates: list[Candidate], kept: list[Candidate], cfg: RecallConfig) -> list[Candidate]:
    """``kept`` plus the dropped candidates that are sequence neighbours (same source, one position
    away) of a kept one, with a graph activation of at least ``CONTEXT_MIN_GRAPH`` and a cosine of
    at least ``recall.min_similarity``; in the candidates' order."""
    if not kept:
        return kept
    near = {
        (c.memory.project, c.memory.source, c.memory.position + d)
        for c in kept
        if c.memory.source is not None and c.memory.position is not None
        for d in (-1, 1)
    }
    if not near:
        return kept
    chosen = {id(c) for c in kept}
    added = False
    for c in candidates:
        m = c.memory
        if (
            id(c) not in chosen
            and (m.project, m.source, m.position) in near
            and c.arm_scores.get("graph", 0.0) >= CONTEXT_MIN_GRAPH
            and c.arm_scores.get("vector", -1.0) >= cfg.min_similarity
        ):
            chosen.add(id(c))
            added = True
    return [c for c in candidates if id(c) in chosen] if added else kept


def apply_floor(candidates: list[Candidate], cfg: RecallConfig, query: str = "") -> list[Candidate]:
    """The candidates that are evidence (see the module docstring), the question's time range
    first. ``cfg`` is the recall config section."""
    words = informative_words(query, cfg.informative_token_rank)
    # A question that is only a time ("what happened last week?"): the range is all it asks for.
    only_time = any(_in_range(c) for c in candidates) and time_only(query, cfg)
    kept = []
    for c in candidates:
        keyword = c.arm_scores.get("keyword", 0.0) > 0
        sim = c.arm_scores.get("vector")
        if only_time and _in_range(c):
            kept.append(c)
            continue
        if sim is None:  # the vector arm did not run: a shared word is all the evidence there is
            if keyword:
                kept.append(c)
            continue
        if not keyword and sim < cfg.min_similarity:
            continue
        scale = length_factor(c.memory.content)
        if sim >= cfg.semantic_min_similarity or (
            sim >= cfg.word_min_similarity * scale and shares_word(words, c.memory.content)
        ):
            kept.append(c)
        elif _in_range(c) and (keyword or shares_word(words, c.memory.content)):
            # In the time range the question names, and sharing a word with it: the range is the
            # evidence the weaker cosine lacks ("what did we decide last week?"). The cosine still
            # has to clear min_similarity (checked above when no keyword matched).
            if sim >= cfg.min_similarity * scale:
                kept.append(c)
    if not kept:
        # In the time range the question names and matching its words: the answer itself ("what
        # incidents did we have in May 2024?": "Incident: ..." of 14 May, a cosine of 0.09 with a
        # short question that has a date in it). A result is never emptied while it has one.
        kept = [c for c in candidates if _in_range(c) and c.arm_scores.get("keyword", 0.0) > 0]
    kept = _with_context(candidates, kept, cfg)
    if kept and cfg.relative_floor > 0:
        best = max(c.score for c in kept)
        if best > 0:  # (a question that is only a time keeps all its range)
            kept = [c for c in kept if c.score >= cfg.relative_floor * best or (only_time and _in_range(c))]
    return in_range_first(kept) if only_time else kept
