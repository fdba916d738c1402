"""Which graph links the memories a write stores get, decided from what the store read.

The store writes links inside the write's transaction (``pipeline/store/graph.py write_links``),
but which ones is the write path's choice: ``LinkPlan`` is handed to ``Store.insert`` and
``Store.update``, which call it once the rows' ids are known and write exactly the rows it
returns. Everything here is a pure function of the plan and those ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

import numpy as np

from memlane.pipeline.config import GraphConfig
from memlane.pipeline.entities import Entity, extract
from memlane.pipeline.providers.embedding.base import Embedder, unit_rows
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.pipeline.store.graph import LinkItem, LinkRows, LinkSettings
from memlane.pipeline.store.rows import StoredRow


def relates_targets(
    candidates: list[tuple[UUID | int, float]], stored: list[tuple[UUID, bool]], i: int, k: int
) -> list[tuple[UUID, float]]:
    """Row i's relates_to links, its best ``k`` candidates that came before it. A memory stored
    before the batch did; of the batch's new rows (one created_at), the lower ids did, as in the
    (created_at, id) order ``memlane maintain`` rebuilds by. ``candidates``: stored memories' ids
    and indexes of other rows of the batch, with their similarity; ``stored``: the batch's (id,
    created) per row, as ``Store.insert`` returns them."""
    me = stored[i][0]
    best: dict[UUID, float] = {}
    for t, w in candidates:
        if isinstance(t, int):
            t, new = stored[t]
            if new and not t < me:
                continue
        if t != me and w > best.get(t, -2.0):
            best[t] = w
    return sorted(best.items(), key=lambda kv: -kv[1])[:k]


def chain_links(stored: list[tuple[UUID, bool]]) -> list[tuple[UUID, UUID]]:
    """``next`` links between consecutive rows of a conversation, where both rows are new."""
    return [(a, b) for (a, new_a), (b, new_b) in zip(stored, stored[1:], strict=False) if new_a and new_b]


@dataclass(slots=True)
class LinkPlan:
    """What the write path asks ``Store.insert`` to link, row by row (same order as the rows), or
    ``Store.update`` to link again after new content (only ``settings`` is read then)."""

    settings: LinkSettings
    entities: list[list[Entity]]
    chain: bool = False  # consecutive rows of the batch are a conversation: link them with ``next``
    # Per row, its relates_to targets found before the insert (``relates_to``): a
    # stored memory's id, or the index of an earlier row of the batch. None: searched in SQL.
    relates: list[list[tuple[UUID | int, float]]] | None = None

    def after_insert(self, rows: list[StoredRow], stored: list[tuple[UUID, bool]]) -> LinkRows:
        """Entities and links of the rows this insert created (duplicates are not linked again)."""
        items = [
            LinkItem(
                mid,
                r.project,
                self.entities[i],
                None
                if self.relates is None
                else relates_targets(self.relates[i], stored, i, self.settings.relates_to_k),
            )
            for i, (r, (mid, created)) in enumerate(zip(rows, stored, strict=True))
            if created
        ]
        return LinkRows(items, self.settings, chain_links(stored) if self.chain else [])

    def after_update(self, memory_id: UUID, project: str, content: str) -> LinkRows:
        """New content or date: its entities, relates_to and same_time links are made again."""
        return LinkRows([LinkItem(memory_id, project, extract(content))], self.settings)


def link_settings(cfg: GraphConfig, embedder: Embedder | None = None) -> LinkSettings:
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
    batch in its project (an int: a batch index). ``relates_targets`` keeps the earlier ones, in the
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


def link_plan(
    cfg: GraphConfig, inputs: list[MemoryInput], *, chain: bool = True, embedder: Embedder | None = None
) -> LinkPlan:
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
