"""Words that say little, shared by the relevance floor (``recall/threshold.py``), entity
extraction (``entities.py``), topic naming (``remember/``) and the checks on LLM replies
(``llm/replies.py``): English stopwords, a word's rank in the cl100k_base tokenizer, whose merges
follow corpus frequency, and a stand-in for stemming when words are compared."""

from __future__ import annotations

import functools
import re

from memlane.pipeline.tokens import _encoding

# PostgreSQL's (Snowball's) English stopwords: the keyword arm ignores them too.
STOPWORDS = frozenset(
    """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she
    her hers herself it its itself they them their theirs themselves what which who whom this that
    these those am is are was were be been being have has had having do does did doing a an the and
    but if or because as until while of at by for with about against between into through during
    before after above below to from up down in out on off over under again further then once here
    there when where why how all any both each few more most other some such no nor not only own
    same so than too very s t can will just don should now""".split()
)


@functools.cache
def token_rank(word: str) -> int:
    """The cl100k_base id of ``word`` (with its leading space) when it is one token, else a rank
    past every id: the lower, the more frequent the word."""
    ids = _encoding().encode_ordinary(" " + word)
    return ids[0] if len(ids) == 1 else 1 << 30


WORD = re.compile(r"[a-z0-9]+")


def same_word(a: str, b: str) -> bool:
    """Equal, a plural, or a shared prefix of 4+ letters that leaves at most 2 letters of suffix on
    the shorter word (a stand-in for stemming: painted/painting, adopt/adoption, but not
    mercury/merchandise)."""
    if a == b or a in (b + "s", b + "es") or b in (a + "s", a + "es"):
        return True
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n >= 4 and n >= min(len(a), len(b)) - 2


def shares_word(words: frozenset[str], content: str) -> bool:
    """Whether ``content`` has a word that ``same_word`` pairs with one of ``words``. Only words
    that are equal, a plural of each other or share their first four letters can pair, so each
    word is compared with those alone (a recall asks this of every candidate)."""
    if not words:
        return False
    found = set(WORD.findall(content.lower()))
    by_prefix: dict[str, list[str]] = {}
    for x in found:
        if len(x) >= 4:
            by_prefix.setdefault(x[:4], []).append(x)
    for w in words:
        if w in found or w + "s" in found or w + "es" in found:
            return True
        if (w.endswith("s") and w[:-1] in found) or (w.endswith("es") and w[:-2] in found):
            return True
        if len(w) >= 4 and any(same_word(w, x) for x in by_prefix.get(w[:4], ())):
            return True
    return False
