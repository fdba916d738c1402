"""What retrieval (stage 4) gathers and every later stage reads: ``Retrieved``, the arms' ranked
lists and each candidate's exact score on every active arm; and what the arms that find memories
by other paths (graph, temporal) need to make their hits candidates like the store arms' own: the
request's filters (``Filters.admits``), exact store-arm scores for ids found elsewhere (``score_ids``)
and an arm's ranked list of them (``ranked_memories``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

from memlane.pipeline.config import ARM_WEIGHTS
from memlane.pipeline.providers.embedding.base import calibrated
from memlane.pipeline.recall.context import RecallContext, Vector
from memlane.pipeline.records import Memory, Query, stable_key
from memlane.pipeline.store.search import Hit, KeywordBounds, QueryTerms

# What a Python arm's ``prepare`` reads from the question alone (``arms.py``), handed to its run as
# a future: the question's entity nodes, entity id -> name (the graph arm's, the one arm that
# prepares today; another arm's reads would join this type).
Prepared = dict[int, str]


class Expanded(Protocol):
    """What an arm that expands from entry points returns (``arms.Expander``): memory ids with their
    scores, best first, and what it did (the trace's detail, which retrieval adds to)."""

    @property
    def ranked(self) -> list[tuple[UUID, float]]: ...

    @property
    def detail(self) -> dict[str, Any]: ...


@dataclass(slots=True)
class Retrieved:
    """Ranked lists per arm and query text (``vector``, ``keyword``, ``vector:1``, ``vector:hyde``...),
    plus every candidate's exact score on each active arm (the best over the query texts)."""

    # Every registered arm: config.ARM_WEIGHTS names them in the registry's order (arms.py checks).
    arms: tuple[str, ...] = field(default_factory=lambda: tuple(ARM_WEIGHTS))
    lists: dict[str, list[tuple[Memory, float]]] = field(default_factory=dict)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)  # memory id -> arm -> score
    memories: dict[str, Memory] = field(default_factory=dict)
    # The query texts' embeddings (Python arms reuse them).
    vectors: list[Vector] = field(default_factory=list)
    notes: dict[str, object] = field(default_factory=dict)  # arm -> what it did, for the stage's detail
    embedding: list[float] | None = None  # the question's, when an arm needed one (the graph arm reuses it)
    # Per Python arm: what it did (the trace).
    details: dict[str, dict[str, Any]] = field(default_factory=dict)
    terms: QueryTerms | None = None  # the question's (store/search.py), when the keyword arm read them
    prepared: dict[str, asyncio.Future[Prepared]] = field(default_factory=dict)  # arm -> its early reads
    # Read with the store arms' rows (``Hit``): the memories whose 8-digit handle is unique, and the
    # version of each (project, category) seen; stages 8 and 9 read the rest themselves.
    handle8_unique: set[UUID] = field(default_factory=set)
    category_versions: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, suffix: str, hits: list[Hit]) -> None:
        for arm in self.arms:
            ranked = sorted(
                (h for h in hits if arm in h.found_by), key=lambda h: (-h.scores[arm], *stable_key(h.memory))
            )
            if ranked:
                self.lists[arm + suffix] = [(h.memory, h.scores[arm]) for h in ranked]
        for h in hits:
            key = str(h.memory.id)
            self.memories[key] = h.memory
            best = self.scores.setdefault(key, {})
            for arm in self.arms:
                if arm in h.scores:
                    best[arm] = max(best.get(arm, float("-inf")), h.scores[arm])
        self.note_reads(hits)

    def note_reads(self, hits: Iterable[Hit]) -> None:
        """What ``hits`` say of their handles and categories (see ``handle8_unique``)."""
        for h in hits:
            if h.handle8_unique:
                self.handle8_unique.add(h.memory.id)
            if h.category_version is not None and h.memory.category is not None:  # (read with a category)
                self.category_versions[(h.memory.project, h.memory.category)] = h.category_version

    def add_exact(self, memory: Memory, scores: dict[str, float]) -> None:
        """Exact scores a Python arm computed for a memory on other arms; a score already there
        (from the store arms) is kept."""
        key = str(memory.id)
        self.memories.setdefault(key, memory)
        best = self.scores.setdefault(key, {})
        for arm, score in scores.items():
            best.setdefault(arm, score)

    def add_scores(self, hits: list[Hit]) -> None:
        """Exact scores on the store arms for memories a Python arm found, without adding them to
        the store arms' ranked lists (they were not in their top k)."""
        for h in hits:
            key = str(h.memory.id)
            self.memories.setdefault(key, h.memory)
            best = self.scores.setdefault(key, {})
            for arm in self.arms:
                if arm in h.scores:
                    best[arm] = max(best.get(arm, float("-inf")), h.scores[arm])
        self.note_reads(hits)

    def add_list(self, arm: str, ranked: list[tuple[Memory, float]]) -> None:
        """A Python arm's ranked list: it scores only its own hits."""
        if not ranked:
            return
        self.lists[arm] = ranked
        for memory, score in ranked:
            key = str(memory.id)
            self.memories.setdefault(key, memory)
            best = self.scores.setdefault(key, {})
            best[arm] = max(best.get(arm, float("-inf")), score)


async def score_ids(
    ctx: RecallContext,
    query: Query,
    found: Expanded,
    ids: list[UUID],
    embedding: Vector | None,
    terms: QueryTerms | None,
) -> list[Hit]:
    """Exact scores on the store arms (cosine, BM25 of the question) of memories a Python arm found
    (``found``: its result, whose detail counts the statement) and the store arms did not return;
    for ``Retrieved.add_scores`` (not added to their lists)."""
    if not ids:
        return []
    found.detail["queries"] = found.detail.get("queries", 0) + 1
    first = "vector" if embedding is not None else "keyword"
    hits = await ctx.store.search(
        text=query.text,
        embedding=embedding,
        filters=ctx.request.filters,
        k=len(ids),
        bounds=KeywordBounds.of(ctx.config.recall),
        arms=(first,),
        preselected={first: ids},
        terms=terms,  # (the question's, as the keyword arm read them)
    )
    return calibrated(ctx.embedder, hits, ["vector"])  # on the store arms' scale


def ranked_memories(
    ctx: RecallContext, found: Expanded, retrieved: Retrieved, unknown: list[UUID]
) -> list[tuple[Memory, float]]:
    """A Python arm's ranked memory ids (``found.ranked``) as its list: those read, by the store
    arms or scored for it, that pass the request's filters. Its detail counts them, and how many
    only it found."""
    now = ctx.clock()
    out = []
    for m, score in found.ranked:
        memory = retrieved.memories.get(str(m))
        if memory is not None and ctx.request.filters.admits(memory, now):
            out.append((memory, float(score)))
    found.detail["hits"] = len(out)
    found.detail["new_hits"] = sum(1 for m in unknown if str(m) in retrieved.memories)
    return sorted(out, key=lambda x: (-x[1], *stable_key(x[0])))
