"""Words that say little, shared by the relevance floor (``recall/threshold.py``), entity
extraction (``entities.py``) and topic naming (``remember/``): English stopwords and a
word's rank in the cl100k_base tokenizer, whose merges follow corpus frequency."""

from __future__ import annotations

import functools

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
