"""The write path: validate, embed in batches, store. Nothing is written unless every item is valid."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import numpy as np

from memlane.pipeline.config import EngineConfig, GraphConfig
from memlane.pipeline.entities import extract
from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.providers.embedding import embed_texts
from memlane.pipeline.providers.embedding.base import unit_rows
from memlane.pipeline.records import Remembered
from memlane.pipeline.remember import facttypes
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.pipeline.remember.links import LinkPlan
from memlane.pipeline.store import StoredRow
from memlane.pipeline.store.graph import NEIGHBOUR_EF_SEARCH, LinkSettings


def link_settings(cfg: GraphConfig, embedder=None) -> LinkSettings:
    """The link rules of ``[graph]``; ``relates_to_min_similarity`` is on the reference cosine scale
    (``Embedder.calibrate``), so it is turned into ``embedder``'s raw cosine, which the stored
    vectors give."""
    floor = cfg.relates_to_min_similarity
    if embedder is not None:
        floor = embedder.uncalibrate(floor)
    return LinkSettings(
        relates_to_k=cfg.relates_to_k,
        relates_to_min_similarity=floor,
        same_time_k=cfg.same_time_k,
    )


def relates_to(
    inputs: list[MemoryInput],
    vectors: list[list[float]],
    found: list[list[tuple[UUID, float]]],
    settings: LinkSettings,
) -> list[list[tuple[UUID | int, float]]]:
    """Each new memory's relates_to candidates at or above the similarity floor: the stored memories
    of its project found before the insert (``found``, best first) and the other memories of the
    batch in its project (an int: a batch index). ``links.relates_targets`` keeps the earlier ones, in the
    order ``memlane maintain`` rebuilds links by, and the best ``relates_to_k`` of them."""
    unit = unit_rows(vectors)
    sims = unit @ unit.T
    floor = settings.relates_to_min_similarity
    projects = np.asarray([m.project for m in inputs], dtype=object)
    out: list[list[tuple[UUID | int, float]]] = []
    for i, m in enumerate(inputs):
        cands: list[tuple[UUID | int, float]] = [(mid, s) for mid, s in found[i] if s >= floor]
        ok = (sims[i] >= floor) & (projects == m.project)
        ok[i] = False
        cands += [(int(j), float(sims[i, j])) for j in np.flatnonzero(ok)]
        out.append(cands)
    return out


def link_plan(cfg: GraphConfig, inputs: list[MemoryInput], *, chain: bool = True, embedder=None) -> LinkPlan:
    """The graph part of a write: each memory's entities, and whether the batch is one conversation
    (it shares a source, gives no positions and has more than one memory: remembered in order)."""
    sources = {m.source for m in inputs}
    conversation = (
        chain
        and len(inputs) > 1
        and len(sources) == 1
        and None not in sources
        and all(m.position is None for m in inputs)
    )
    return LinkPlan(
        settings=link_settings(cfg, embedder),
        entities=[extract(m.content) for m in inputs],
        chain=conversation,
    )


def parse(cfg: EngineConfig, items: list[MemoryInput | dict[str, Any]]) -> list[MemoryInput]:
    """Validate every item before anything is embedded or written."""
    return [MemoryInput.parse(cfg, it) for it in items]


async def _nearest(store, inputs: list[MemoryInput], vectors, k: int) -> list[list[tuple[UUID, float]]]:
    """Each input's ``k`` nearest stored memories of its project: one search per project."""
    found: list[list[tuple[UUID, float]]] = [[] for _ in inputs]
    by_project: dict[str, list[int]] = {}
    for i, m in enumerate(inputs):
        by_project.setdefault(m.project, []).append(i)
    for project, idx in by_project.items():
        hits = await store.nearest_many(project, [vectors[i] for i in idx], k, ef_search=NEIGHBOUR_EF_SEARCH)
        for i, h in zip(idx, hits, strict=True):
            found[i] = h
    return found


async def store_inputs(
    store,
    embedder,
    inputs: list[MemoryInput],
    topics=None,
    *,
    timeout_s: float = 60.0,
    similar: tuple[float, int] | None = None,
    vectors: list[list[float]] | None = None,
    links: LinkPlan | None = None,
    found: list[list[tuple[UUID, float]]] | None = None,
    topics_llm=None,  # pipeline/topics_llm.TopicsLLM: the LLM refines topics, fact types; never raises
) -> list[Remembered]:
    """Embed (off the event loop, bounded by ``timeout_s``) and insert in one transaction; one
    result per input, in order. An embedder that fails or hangs stores nothing (EmbeddingFailed).
    ``vectors``: the inputs' embeddings when the caller has them already (ingest).
    ``topics`` (pipeline/topics.Topics, when ``[topics] enabled``) assigns topics and fact types:
    the first topic becomes the category when the caller gave none.
    ``similar`` = (threshold, limit): also report, for each new memory, up to ``limit`` memories
    already stored in its project with a cosine similarity at or above ``threshold`` (one nearest-
    neighbour statement per project in the batch, before the insert, shared with the links).
    ``links``: the memories' entities and graph links (``link_plan``), written in the same transaction.
    ``found``: each input's nearest stored memories (id, similarity), best first, when the caller
    searched already (ingest, for novelty): no search is made here."""
    if vectors is None:
        try:
            vectors = await embed_texts(embedder, [m.content for m in inputs], timeout_s)
        except EmbeddingFailed as e:
            raise EmbeddingFailed(f"{e}; nothing was stored") from e
    near: list[tuple[tuple[UUID, float], ...]] = [()] * len(inputs)
    limit = similar[1] if similar is not None else 0
    k = max(limit, links.settings.relates_to_k if links is not None else 0)
    if k > 0 and inputs:
        # One nearest-neighbour search per new memory, before the insert, serves both the
        # 'similar' report and the relates_to links (pipeline/store/graph.py).
        if found is None:
            found = await _nearest(store, inputs, vectors, k)
        if limit > 0:
            threshold = similar[0]
            near = [tuple((mid, round(sim, 4)) for mid, sim in h[:limit] if sim >= threshold) for h in found]
        if links is not None and links.settings.relates_to_k > 0:
            links.relates = relates_to(inputs, vectors, found, links.settings)
    if topics is not None and topics.enabled:
        assigned = await topics.assign_batch(store, [(m.project, m.content) for m in inputs], vectors)
        if topics_llm is not None:
            inputs, assigned = await topics_llm(store, inputs, vectors, assigned)
        inputs = [
            m.model_copy(
                update={
                    "category": m.category or (a.topics[0] if a.topics else None),
                    "fact_type": m.fact_type or facttypes.classify(m.content),
                }
            )
            for m, a in zip(inputs, assigned, strict=True)
        ]
    else:
        assigned = [None] * len(inputs)
    rows = [
        StoredRow(
            project=m.project,
            content=m.content,
            content_hash=m.content_hash,
            embedding=vec,
            category=m.category,
            tags=m.tags,
            metadata=m.metadata,
            pinned=m.pinned,
            priority=m.priority,
            occurred_at=m.occurred_at,
            expires_at=m.expires_at,
            source=m.source,
            position=m.position,
            topics=a.topics if a is not None else None,
            fact_type=m.fact_type,
            auto_topics=a.auto if a is not None else (),
        )
        for m, vec, a in zip(inputs, vectors, assigned, strict=True)
    ]
    try:
        results = await store.insert(rows, model_id=embedder.model_id, links=links)
    except BaseException:
        if topics is not None:  # its cached centroids took this batch, which was not stored
            topics.forget_cache({m.project for m in inputs})
        raise
    return [
        Remembered(
            id=mid,
            status="created" if created else "duplicate",
            project=m.project,
            redacted=tuple((r["kind"], r["count"]) for r in m.redacted),
            # A duplicate is the stored memory itself: nothing new to compare.
            similar=tuple(s for s in hits if s[0] != mid) if created else (),
        )
        for m, (mid, created), hits in zip(inputs, results, near, strict=True)
    ]
