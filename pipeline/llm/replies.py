"""Checks on a model's free-text reply before a recall stage searches with it (query synthesis's
variants, HyDE's hypothetical memory): a reply with nothing usable on the question's topic raises
``LLMError`` with the reason, so the stage degrades (``degraded: <reason>`` in the trace, like a
timeout) and recall answers from the offline path instead of searching for junk.

Unusable:

- a refusal or a model talking about itself ("I can't help with that", "I'm sorry, but I
  cannot...", "As an AI language model..."): matched on those phrasings, not on any "I can't",
  which a hypothetical memory may well say ("I can't eat peanuts");
- junk: empty, no letters, mostly punctuation (fewer letters than punctuation marks), or a
  JSON or markup fragment (it starts with a bracket or a tag: "}{ not json");
- the question repeated (the same words in the same order);
- off topic: it shares no content word (not a stopword, stem-like match, ``words.shares_word``)
  with the question. Query synthesis is meant to find synonyms, so this is asked of its variants
  together, not of each one: a variant of synonyms only is kept when another variant is on topic.
  A question without content words ("what happened?") has no topic to check.
"""

from __future__ import annotations

import re

from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.words import STOPWORDS, WORD, shares_word

# A model declining, or talking about itself. Each phrasing is specific (a refusal's verb after
# "I can't"), since a hypothetical memory may say "I can't eat peanuts" or "I'm sorry I missed it".
_A = "['’]"
_REFUSALS = [
    r"\bas an ai\b",
    rf"\bI(?: am|{_A}m) (?:an ai|a (?:large )?language model)\b",
    rf"^\W*(?:I(?: am|{_A}m) )?sorry\b[^.!?\n]{{0,40}}?\b(?:but|I can|I cannot|unable)\b",
    r"^\W*I apologi[sz]e\b",
    rf"\bI(?: can(?:not|{_A}t| not)| won{_A}t| will not|(?: am|{_A}m) (?:not able|unable)) (?:to )?"
    r"(?:help|assist|answer|comply|provide|fulfil|fulfill|generate|create|write|do that|share|respond|"
    r"process|determine|access|browse)\b",
    rf"\bI (?:do not|don{_A}t) have (?:access|enough|any (?:information|data|context|memor))",
]
_SPACE = r"\s+"
_REFUSAL = re.compile("|".join("(?:" + p.replace(" ", _SPACE) + ")" for p in _REFUSALS), re.I | re.M)
_LETTER = re.compile(r"[^\W\d_]")


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` that are not stopwords (numbers and one-letter words left out)."""
    return frozenset(
        w for w in WORD.findall(text.lower()) if w not in STOPWORDS and len(w) > 1 and not w.isdigit()
    )


def junk(text: str) -> str | None:
    """Why ``text`` is not something to search with (a refusal or junk), or None."""
    t = text.strip()
    if not t:
        return "empty reply"
    if _REFUSAL.search(t):
        return f"refusal {t[:60]!r}"
    letters = len(_LETTER.findall(t))
    if letters == 0:
        return f"no words in {t[:60]!r}"
    if letters < sum(1 for ch in t if not ch.isspace() and not ch.isalnum()):
        return f"mostly punctuation {t[:60]!r}"
    if t[0] in "{}[]<>":
        return f"a JSON or markup fragment {t[:60]!r}"
    return None


def repeats(text: str, question: str) -> bool:
    """Whether ``text`` is the question again (the same words in the same order)."""
    return WORD.findall(text.lower()) == WORD.findall(question.lower())


def on_topic(texts: list[str] | tuple[str, ...], question: str) -> bool:
    """Whether any of ``texts`` shares a content word with the question (always, when the question
    has none)."""
    words = content_words(question)
    return not words or any(shares_word(words, t) for t in texts)


def check_reply(text: str) -> None:
    """Raise ``LLMError`` when the whole reply is a refusal or junk."""
    why = junk(text)
    if why is not None:
        raise LLMError(why)
