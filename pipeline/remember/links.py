"""Which graph links the memories a write stores get, decided from what the store read.

The store writes links inside the write's transaction (``pipeline/store/graph.py write_links``),
but which ones is the write path's choice: ``LinkPlan`` is handed to ``Store.insert`` and
``Store.update``, which call it once the rows' ids are known and write exactly the rows it
returns. Everything here is a pure function of the plan and those ids.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from memlane.pipeline.entities import Entity, extract
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
    me, best = stored[i][0], {}
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
    # Per row, its relates_to targets found before the insert (remember/pipeline.relates_to): a
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
