"""How marks are made: on the write path (step 8 of remember, ingest and update) and by import,
which restores an export's marks between the memories as it stored them.

On the write path each new statement of one fact (``detect.may_decide``) is compared with its
nearest current memories of its project: those step 5 found before the insert, or searched here,
and the new memories of the same batch. The ``supersede`` LLM stage (``judge.py``) decides when it
serves the write, the rules (``detect.py``) otherwise; the store sets ``superseded_by`` and
``valid_until`` on the older of each pair (``Store.mark_superseded``) and ``conflicts_with`` on both
of a contradiction (``Store.mark_conflicts``). Nothing is deleted.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from uuid import UUID

import numpy as np

from memlane.pipeline.providers.embedding.base import unit_rows
from memlane.pipeline.records import Remembered, Replaced
from memlane.pipeline.store import Store
from memlane.pipeline.store.graph import NEIGHBOUR_EF_SEARCH
from memlane.pipeline.supersession import detect
from memlane.pipeline.supersession.judge import SupersedeLLM

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Judge:
    """Who decides on the write path: the ``supersede`` LLM stage when it serves this write (at
    most ``concurrency`` calls at once, ``[llm] max_concurrency``), else the rules."""

    llm: SupersedeLLM | None = None
    concurrency: int = 1


async def mark_new(
    store: Store,
    judge: Judge,
    results: list[Remembered],
    texts: Sequence[str],
    vectors: list[list[float]],
    found: list[list[tuple[UUID, float]]] | None = None,
) -> list[Remembered]:
    """Each new memory (``results``, with its ``texts`` and ``vectors``) against its nearest
    current memories of its project (``detect.decide``): those step 5 found before the insert
    (``found``; searched here when None) and the new memories of the same batch. The older of a
    pair that states one attribute's values is marked superseded by the newer. A failure here
    keeps the memories as stored, unmarked."""
    # Only a statement of one fact can supersede or be superseded: most chat turns and document
    # pieces are not, and cost nothing more here.
    created = [i for i, r in enumerate(results) if r.status == "created" and detect.may_decide(texts[i])]
    if not created:
        return results
    try:
        return await _mark(store, judge, results, list(texts), vectors, found, created)
    except Exception as e:  # noqa: BLE001 - the memories are stored: never a failed remember
        log.warning("supersession skipped: %s", type(e).__name__)
        return results


async def _mark(
    store: Store,
    judge: Judge,
    results: list[Remembered],
    texts: list[str],
    vectors: list[list[float]],
    found: list[list[tuple[UUID, float]]] | None,
    created: list[int],
) -> list[Remembered]:
    by_project: dict[str, list[int]] = defaultdict(list)
    for i in created:
        by_project[results[i].project].append(i)
    near: dict[int, list[tuple[UUID, float]]] = {}
    for project, idx in by_project.items():
        if found is None:
            hits = await store.nearest_many(
                project, [vectors[i] for i in idx], detect.CANDIDATES + 1, ef_search=NEIGHBOUR_EF_SEARCH
            )
        else:
            hits = [found[i][: detect.CANDIDATES] for i in idx]
        mates = _batch_mates(idx, vectors) if len(idx) > 1 else {}
        for i, h in zip(idx, hits, strict=True):
            near[i] = [
                (mid, sim)
                for mid, sim in [*h, *((results[j].id, sim) for j, sim in mates.get(i, ()))]
                if mid != results[i].id and sim >= detect.MIN_SIMILARITY
            ]
    wanted = {mid for h in near.values() for mid, _ in h}
    if not wanted:
        return results
    read = await store.memories_by_id(list(wanted | {results[i].id for i in created}))

    def text(mid: UUID) -> detect.Text:
        m = read[mid]
        return detect.Text(id=m.id, content=m.content, valid_from=m.valid_from)

    asked: dict[int, list[tuple[detect.Text, float]]] = {}
    for i in created:
        if results[i].id not in read:
            continue
        current = [
            (text(mid), sim) for mid, sim in near[i] if mid in read and read[mid].superseded_by is None
        ]
        if current:
            asked[i] = current
    verdicts: dict[int, list[detect.Verdict]] = {}
    if judge.llm is not None:  # never raises: the offline detector decides what it cannot
        llm = judge.llm
        # Each call's timeout starts when it may go out: at most [llm] max_concurrency at once.
        gate = asyncio.Semaphore(judge.concurrency)

        async def decide(i: int, current: list[tuple[detect.Text, float]]) -> list[detect.Verdict]:
            async with gate:
                return await llm.decide(text(results[i].id), current)

        decided = await asyncio.gather(*(decide(i, current) for i, current in asked.items()))
        verdicts = dict(zip(asked, decided, strict=True))
    else:
        verdicts = {i: detect.decide(text(results[i].id), current) for i, current in asked.items()}
    # Memories of one batch (one document, one import) do not contradict each other: a list's
    # items that differ in one value are the list's items.
    batch = {results[i].id for i in created} if len(created) > 1 else set()
    marked: set[tuple[UUID, UUID]] = set()
    for project, idx in by_project.items():
        pairs = list(
            dict.fromkeys((v.old, v.new) for i in idx for v in verdicts.get(i, ()) if v.kind == "replaces")
        )
        marked |= await store.mark_superseded(project, pairs)
        await store.mark_conflicts(
            project,
            list(
                dict.fromkeys(
                    (v.old, v.new)
                    for i in idx
                    for v in verdicts.get(i, ())
                    if v.kind == "conflicts" and not (v.old in batch and v.new in batch)
                )
            ),
        )

    def replaced(mid: UUID) -> Replaced:
        return Replaced(id=mid, content=read[mid].content, date=read[mid].valid_from)

    out = list(results)
    for i, vs in verdicts.items():
        me = results[i].id
        out[i] = replace(
            results[i],
            supersedes=tuple(replaced(v.old) for v in vs if v.new == me and (v.old, v.new) in marked),
            conflicts=tuple(replaced(v.old) for v in vs if v.kind == "conflicts" and v.old not in batch),
            superseded_by=next((v.new for v in vs if v.old == me and (v.old, v.new) in marked), None),
        )
    return out


def _batch_mates(idx: list[int], vectors: list[list[float]]) -> dict[int, list[tuple[int, float]]]:
    """For each of a batch's new memories of one project, its closest others of the batch (which
    step 5's search, made before the insert, could not see): (position, cosine similarity)."""
    v = unit_rows([vectors[i] for i in idx])
    sims = v @ v.T
    np.fill_diagonal(sims, -1.0)
    k = min(detect.CANDIDATES, len(idx) - 1)
    out: dict[int, list[tuple[int, float]]] = {}
    for row, i in enumerate(idx):
        best = np.argsort(-sims[row])[:k]
        out[i] = [(idx[c], float(sims[row, c])) for c in best]
    return out


# -- import: an export's marks restored ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Exported:
    """One exported memory's marks, by the export's ids (as the JSONL line has them)."""

    id: object
    superseded_by: object = None
    conflicts_with: Sequence[object] = ()


@dataclass(frozen=True, slots=True)
class Restored:
    superseded: int  # memories marked superseded again
    conflicts: int | None  # contradicting pairs marked again; None when the file listed none


def _marks(exported: Sequence[Exported], stored: Sequence[UUID]) -> Iterator[tuple[bool, UUID, UUID]]:
    """The export's marks whose two memories the file holds, between them as now stored, in the
    file's order: (whether it is a supersession, else a contradiction; the memory it is on; the
    other one). ``exported[i]`` was stored as ``stored[i]``."""
    new_id = {str(e.id): new for e, new in zip(exported, stored, strict=True) if e.id is not None}
    for e, new in zip(exported, stored, strict=True):
        others = [(True, e.superseded_by)] if e.superseded_by is not None else []
        for is_successor, other in [*others, *((False, c) for c in e.conflicts_with)]:
            if str(other) in new_id and new_id[str(other)] != new:
                yield is_successor, new, new_id[str(other)]


def touched(exported: Sequence[Exported], stored: Sequence[UUID]) -> set[UUID]:
    """The stored memories that ``restore`` would mark: both ends of every exported mark whose two
    memories the file holds."""
    return {m for _, new, other in _marks(exported, stored) for m in (new, other)}


async def restore(
    store: Store, exported: Sequence[Exported], stored: Sequence[UUID], projects: Mapping[UUID, str]
) -> Restored:
    """The export's marks between the memories as now stored: ``exported[i]`` was stored as
    ``stored[i]``; ``projects`` has the project of each memory ``touched`` names. The detector may
    have decided otherwise while importing: the exported decision, perhaps a user's, stands
    (``Store.set_successor``, which refuses a chain that would loop). A mark naming a memory the
    file does not hold is dropped."""
    superseded = 0
    conflicts: dict[str, list[tuple[UUID, UUID]]] = {}
    for is_successor, new, other in _marks(exported, stored):
        if is_successor:
            await store.set_successor(new, other)
            superseded += 1
        else:
            conflicts.setdefault(projects[new], []).append((new, other))
    for project, pairs in conflicts.items():
        await store.mark_conflicts(project, pairs)
    # Each contradiction is listed on both of its sides.
    counted = sum(len(p) for p in conflicts.values()) // 2 if conflicts else None
    return Restored(superseded=superseded, conflicts=counted)
