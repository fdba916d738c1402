"""Topics: what a memory is about, assigned offline when it is stored (``[topics]``).

Two kinds of topic:

- **fixed** topics come from ``[topics] custom_topics``. Their centroid is the embedding of their
  name, description and keywords (embedded once per process); a keyword of the topic (or a word of
  its name) occurring in the memory adds ``keyword_weight`` to its confidence. A fixed topic fits
  when its confidence (cosine similarity + keyword bonus) is at least ``min_confidence``.
- **automatic** topics are made from the memories themselves, per project, in PostgreSQL
  (``memlane_topics``, so every server sharing the database sees them). Their centroid is the
  running mean of their members' embeddings, kept as a sum that each remembered batch adds to in
  one UPSERT. A memory joins an automatic topic when its cosine similarity to the centroid is at
  least ``auto_min_similarity``; when none is that close, a new topic is named after the memory's
  first noun phrase that says something (``labels.py``: "berlin marathon" for "User ran the Berlin
  marathon", not "ran marathon"), but only when the memory has at least two distinctive key terms
  (a memory of common words makes no topic: categorising those moved stale values above current
  ones through the category boost), only up to ``max_auto_topics`` per project, and a new name that already exists joins
  that topic instead of making another. The topic keeps the memory's key terms (``key_terms``) to
  describe it.

``taxonomy``: ``fixed`` uses fixed topics only (a memory may get none), ``auto`` automatic ones
only, ``hybrid`` fixed ones first and an automatic one when no fixed topic fits. A memory gets at
most ``max_topics_per_entry`` topics, best first, each within ``TOPIC_MARGIN`` of the best one;
its first topic becomes its category when the caller gave none (pipeline/remember/write.py).

Servers are stateless apart from a cache: a process keeps a project's automatic topics for
``AUTO_TOPICS_TTL_S`` seconds, adding its own batches to the cached centroids as it goes.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

from memlane.pipeline.remember.labels import label
from memlane.pipeline.words import STOPWORDS, same_word, token_rank

if TYPE_CHECKING:
    from pgvector import Vector

    from memlane.pipeline.config import TopicsConfig
    from memlane.pipeline.providers.embedding.base import Embedder
    from memlane.pipeline.store import Store

# A memory's embedding: a list (the write path's), an array, or a pgvector ``Vector`` (the store's).
EmbeddingValue: TypeAlias = "Sequence[float] | np.ndarray | Vector"

# Further topics of a memory must be within this much of its best topic's confidence.
TOPIC_MARGIN = 0.08
AUTO_TOPICS_TTL_S = 5.0
# A key term must be at least this rare (its cl100k_base token id; merges follow corpus frequency,
# so low ids are the most frequent words) or span several tokens.
KEY_TERM_MIN_RANK = 2500
MIN_KEY_TERMS = 2  # distinctiveness: a memory needs this many key terms to found a topic
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*[A-Za-z]|[A-Za-z]")
# Words that say little about a subject even when rare enough: time words, vague adjectives.
_GENERIC = frozenset(
    """about also always another around away back before bit came come comes could daily done
    each every few first good great however just last later like little long made make many maybe
    more much never next nice night often once really right said same second several since small
    something sometimes soon still sure thing things think though today told tomorrow took towards
    usually want week weekend well went whole will would year years yesterday yet monday tuesday
    wednesday thursday friday saturday sunday morning afternoon evening january february march april
    may june july august september october november december minutes hours days weeks months
    thanks thank please okay hello yes yeah sorry cool near far""".split()
)
_SPEAKER = re.compile(r"^\s*[\w .'-]{1,40}:\s+")


@dataclass(slots=True)
class Topic:
    name: str
    kind: str  # "fixed" or "auto"
    vector: np.ndarray  # fixed: unit embedding of its description; auto: sum of its members' embeddings
    keywords: tuple[str, ...] = ()
    members: int = 0
    # The unit vector, kept until the vector changes (``join``): a batch of remembers compares
    # every memory with every topic of its project, which would otherwise renormalise each topic
    # once per memory.
    _unit: np.ndarray | None = field(default=None, repr=False, compare=False)

    def unit(self) -> np.ndarray:
        if self._unit is None:
            n = float(np.linalg.norm(self.vector))
            self._unit = self.vector / n if n > 0 else self.vector
        return self._unit

    def join(self, v: np.ndarray) -> None:
        """Count one more member's embedding into the (automatic) topic."""
        self.vector = self.vector + v
        self.members += 1
        self._unit = None


@dataclass(frozen=True, slots=True)
class Assignment:
    topics: tuple[str, ...]
    # The automatic topics joined, each with the key terms it gets if this memory creates it.
    auto: tuple[tuple[str, tuple[str, ...]], ...] = ()
    confidences: tuple[float, ...] = ()


def _array(vec: EmbeddingValue) -> np.ndarray:
    """A float32 array of a list, an array or a pgvector ``Vector`` (what the store returns)."""
    if hasattr(vec, "to_numpy"):
        vec = vec.to_numpy()
    return np.asarray(vec, dtype=np.float32)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def key_terms(text: str, n: int = 3) -> list[str]:
    """The memory's most distinctive words, rarest first: lower-case words in the text (capitalised
    ones are mostly names, which make poor topics), neither stopwords nor generic, not verb forms
    (-ed, -ing), rare enough in English (``KEY_TERM_MIN_RANK``)."""
    body = _SPEAKER.sub("", text, count=1)
    seen: dict[str, int] = {}
    for w in _WORD.findall(body):
        if not w.islower() or len(w) < 3 or "'" in w:
            continue
        if w in STOPWORDS or w in _GENERIC or w.endswith(("ed", "ing", "ly")):
            continue
        rank = token_rank(w)
        if rank < KEY_TERM_MIN_RANK:
            continue
        seen.setdefault(w, rank)
    ranked = sorted(seen, key=lambda w: (-min(seen[w], 200_000), w))
    return ranked[:n]


def topic_name(content: str) -> str | None:
    """The name of an automatic topic a memory founds: its first noun phrase that is not vague."""
    return label([content])


def _keyword_hit(keywords: tuple[str, ...], words: set[str], lower: str) -> bool:
    for kw in keywords:
        if " " in kw or "-" in kw:
            if re.search(rf"\b{re.escape(kw)}\b", lower):
                return True
        elif any(same_word(kw, w) for w in words):
            return True
    return False


class Topics:
    """Assigns topics for one engine: the fixed topics' vectors and a short-lived cache of each
    project's automatic topics."""

    def __init__(
        self, cfg: TopicsConfig, embedder: Embedder, *, namer: Callable[[str], str | None] | None = None
    ) -> None:
        self.cfg = cfg
        self.embedder = embedder
        # What a new automatic topic is called after the memory that founds it (``memlane bench
        # labels`` compares namers); None: no topic.
        self.namer = namer or topic_name
        self._fixed: list[Topic] | None = None
        self._auto: dict[str, tuple[float, list[Topic]]] = {}

    @property
    def enabled(self) -> bool:
        return self.cfg.enabled

    def use_embedder(self, embedder: Embedder) -> None:
        """Embed with this model from now on: the fixed topics' vectors are made again with it."""
        if embedder is not self.embedder:
            self.embedder = embedder
            self._fixed = None

    def fixed(self) -> list[Topic]:
        """The fixed topics with their vectors (embeds them on first use: blocking)."""
        if self._fixed is None:
            topics = self.cfg.custom_topics if self.cfg.taxonomy != "auto" else []
            texts = [
                f"{t.name}: {t.description}. {', '.join(t.keywords)}".strip(" .:,") if t.description or t.keywords
                else t.name
                for t in topics
            ]  # fmt: skip
            vectors = self.embedder.embed_batch(texts) if texts else []
            self._fixed = [
                Topic(
                    t.name,
                    "fixed",
                    np.asarray(v, dtype=np.float32),
                    tuple(
                        dict.fromkeys(
                            [*(k.strip().lower() for k in t.keywords if k.strip()), *_words(t.name)]
                        )
                    ),
                )
                for t, v in zip(topics, vectors, strict=True)
            ]
            for t in self._fixed:
                t.vector = t.unit()  # (already unit: its cached unit vector stays right)
        return self._fixed

    async def auto_topics(self, store: Store, project: str) -> list[Topic]:
        """A project's automatic topics, from the cache while it is fresh."""
        if self.cfg.taxonomy == "fixed":
            return []
        now = time.monotonic()
        hit = self._auto.get(project)
        if hit is not None and hit[0] > now:
            return hit[1]
        rows = await store.auto_topics(project)
        topics = [Topic(name, "auto", _array(vec), tuple(terms), n) for name, vec, n, terms in rows]
        self._auto[project] = (now + AUTO_TOPICS_TTL_S, topics)
        return topics

    def forget_cache(self, projects: Iterable[str] | None = None) -> None:
        if projects is None:
            self._auto.clear()
        for p in projects or ():
            self._auto.pop(p, None)

    def _pick(self, scored: list[tuple[float, Topic]]) -> list[tuple[float, Topic]]:
        scored.sort(key=lambda s: (-s[0], s[1].name))
        if not scored:
            return []
        best = scored[0][0]
        return [s for s in scored if s[0] >= best - TOPIC_MARGIN][: self.cfg.max_topics_per_entry]

    def assign(
        self, content: str, vec: EmbeddingValue, fixed: list[Topic], auto: list[Topic], *, learn: bool = True
    ) -> Assignment:
        """The topics of one memory. An automatic topic it joins or creates is updated in ``auto``
        (the caller's list) at once, so the next memory of the batch sees it. ``learn=False``: only
        existing topics, none created or moved (an updated memory's new text)."""
        cfg = self.cfg
        v = _array(vec)
        lower = content.lower()
        words = set(_words(content))
        scored: list[tuple[float, Topic]] = []
        if cfg.taxonomy != "auto" and fixed:
            for t in fixed:
                conf = float(v @ t.vector) + (
                    cfg.keyword_weight if _keyword_hit(t.keywords, words, lower) else 0.0
                )
                if conf >= cfg.min_confidence:
                    scored.append((conf, t))
            chosen = self._pick(scored)
            if chosen or cfg.taxonomy == "fixed":
                return Assignment(tuple(t.name for _, t in chosen), (), tuple(round(c, 4) for c, _ in chosen))
        if cfg.taxonomy == "fixed":
            return Assignment(())
        scored = []
        for t in auto:
            cos = float(v @ t.unit())
            if cos >= cfg.auto_min_similarity:
                scored.append((cos, t))
        chosen = self._pick(scored)
        if not chosen and not learn:
            return Assignment(())
        if not chosen:
            terms = key_terms(content)
            name = self.namer(content) if len(terms) >= MIN_KEY_TERMS else None
            if not name:
                return Assignment(())
            existing = next((t for t in auto if t.name == name), None)
            if existing is not None:
                chosen = [(float(v @ existing.unit()), existing)]
            elif len(auto) >= cfg.max_auto_topics:
                return Assignment(())
            else:
                created = Topic(name, "auto", np.zeros_like(v), tuple(terms), 0)
                auto.append(created)
                chosen = [(1.0, created)]
        if not learn:
            return Assignment(tuple(t.name for _, t in chosen), (), tuple(round(c, 4) for c, _ in chosen))
        for _, t in chosen:
            t.join(v)
        return Assignment(
            tuple(t.name for _, t in chosen),
            tuple((t.name, t.keywords) for _, t in chosen),
            tuple(round(c, 4) for c, _ in chosen),
        )

    async def assign_batch(
        self, store: Store, items: list[tuple[str, str]], vectors: Sequence[EmbeddingValue]
    ) -> list[Assignment]:
        """Topics for (project, content) pairs with their embeddings, in order."""
        fixed = await asyncio.to_thread(self.fixed) if self._fixed is None else self._fixed
        autos = {p: await self.auto_topics(store, p) for p in dict.fromkeys(p for p, _ in items)}
        return [self.assign(c, vec, fixed, autos[p]) for (p, c), vec in zip(items, vectors, strict=True)]

    async def reassign(
        self, store: Store, project: str, content: str, vec: EmbeddingValue
    ) -> tuple[str, ...]:
        """Topics of a memory whose text changed, among the topics that exist."""
        fixed = await asyncio.to_thread(self.fixed) if self._fixed is None else self._fixed
        return self.assign(content, vec, fixed, await self.auto_topics(store, project), learn=False).topics
