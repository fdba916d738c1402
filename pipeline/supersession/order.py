"""Recall's ordering by supersession: what is current first. A candidate that a newer memory
superseded (``superseded_by``, migration 0013) never ranks above the memory at the end of its chain
for a question about the present: that memory is moved (or, when no arm found it, brought in) just
above it, with at least its score. The older one stays in the list: it still answers "what was it
before?". A candidate that contradicts memories no arm found (``conflicts_with``) brings them in
after it: the client sees both sides, each marked ``conflict``.

Before that, two orderings that need no mark (``detect.py`` reads the statements): a question
about someone gets their own facts above their relatives' (``_own_first``), and a question about the
present gets a newer statement of the same fact above an older one (``_newer_first``).

A question about the past ("before", "used to", "previously", "originally", a year) keeps the
order the stages gave, in which the older wording usually matches best. A recall ``as_of`` a time
puts the memories valid then first (their value started by then and was not yet replaced), in the
order the stages gave, and the rest after them.

Recall runs it in stage 8 through ``pipeline/recall/current.py``, which hands in what it reads of
the recall (the question, ``as_of``, the filters, the clock) and reports the outcome as a step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from memlane.pipeline.records import Candidate, Memory
from memlane.pipeline.request import Filters
from memlane.pipeline.store import Store
from memlane.pipeline.supersession.detect import about_someone_else, answers_as_well, same_fact, whose

# Words that ask about an earlier state than today's.
_PAST = re.compile(
    r"\b(before|used to|previous(ly)?|originally|original|formerly|former|earlier|at first|"
    r"back then|back in|ago|until|prior|old|first|last time|(19|20)\d\d)\b",
    re.I,
)


# How far down the list a newer statement of the same fact is looked for: the answers a client reads.
NEWER_WINDOW = 10


def asks_about_the_past(question: str) -> bool:
    return _PAST.search(question) is not None


def valid_at(m: Memory, when: datetime) -> bool:
    """Whether ``m``'s value held at ``when``: it started by then and was not yet replaced."""
    return m.began <= when and (m.valid_until is None or m.valid_until > when)


@dataclass(slots=True)
class Ordered:
    """The candidates in their new order; what moved (``detail``), or why nothing did (``skipped``)."""

    candidates: list[Candidate]
    detail: dict[str, Any] = field(default_factory=dict)
    skipped: str | None = None


@dataclass(frozen=True, slots=True)
class Asked:
    """What the ordering reads of a recall: the question, its ``as_of``, the filters a memory
    brought in must pass, and the wall clock they are checked at."""

    question: str
    as_of: datetime | None
    filters: Filters
    clock: Callable[[], datetime]


async def current_first(store: Store, asked: Asked, candidates: list[Candidate]) -> Ordered:
    as_of = asked.as_of
    if as_of is not None:
        then = [c for c in candidates if valid_at(c.memory, as_of)]
        later = [c for c in candidates if not valid_at(c.memory, as_of)]
        return Ordered(then + later, detail={"as_of": as_of.isoformat(), "valid_then": len(then)})
    present = not asks_about_the_past(asked.question)
    out = list(candidates)
    detail: dict[str, Any] = {}
    if own := _own_first(asked.question, out):
        detail["own_first"] = own
    if present and (newer := _newer_first(asked.question, out)):
        detail["newer_first"] = newer
    superseded = [c.memory.id for c in out if c.memory.superseded_by is not None]
    conflicting = [c.memory.id for c in out if c.memory.conflicts_with]
    if not superseded and not conflicting and not detail:
        return Ordered(candidates, skipped="nothing superseded or in conflict among the candidates")
    if superseded and present:
        detail.update(await _successors_first(store, asked, out, superseded))
    if conflicting:
        detail["conflicts_brought_in"] = await _both_sides(store, asked, out, conflicting)
    if not detail:
        return Ordered(candidates, skipped="a question about the past")
    return Ordered(out, detail=detail)


def _later(a: Memory, b: Memory) -> bool:
    """Whether ``a`` is the newer statement: valid from later, or from the same time and told
    later (a correction the same day)."""
    return (a.valid_from, a.created_at) > (b.valid_from, b.created_at)


def _own_first(question: str, out: list[Candidate]) -> list[str]:
    """For a question about someone ("where does Priya work?"), a statement about them is moved
    above statements about others that rank above it ("Priya's husband Arjun works at Spotify"):
    their relatives' facts share every word of the question but its answer. Returns the moved id."""
    person = whose(question)
    if person is None:
        return []
    end = min(len(out), NEWER_WINDOW)
    others = [i for i in range(end) if about_someone_else(out[i].memory.content, person)]
    if not others:
        return []
    own = next(
        (j for j in range(others[0] + 1, end) if about_someone_else(out[j].memory.content, person) is False),
        None,
    )
    if own is None:
        return []
    i = others[0]
    if any(about_someone_else(out[k].memory.content, person) is False for k in range(i)):
        return []  # the first answer is already theirs
    succ = out.pop(own)
    succ.score = max(succ.score, out[i].score)
    out.insert(i, succ)
    return [str(succ.memory.id)]


def _newer_first(question: str, out: list[Candidate]) -> list[list[str]]:
    """For a question about the present, a newer statement of the same fact (``same_fact``) that
    write time did not mark as a successor, because no change was said or the wording differs too
    much to be sure, is moved above the older one among the first ``NEWER_WINDOW``: recall may
    guess where marking may not. Returns the pairs moved (older, newer)."""
    moved: list[list[str]] = []
    end = min(len(out), NEWER_WINDOW)
    for i in range(end):
        old = out[i].memory
        if old.superseded_by is not None:
            continue  # its marked successor is placed by _successors_first
        newer = [
            j
            for j in range(i + 1, end)
            if _later(out[j].memory, old)
            and out[j].memory.superseded_by is None
            and same_fact(old.content, out[j].memory.content)
            and answers_as_well(question, old.content, out[j].memory.content)
        ]
        if not newer:
            continue
        j = max(newer, key=lambda k: out[k].memory.valid_from)
        succ = out.pop(j)
        succ.score = max(succ.score, out[i].score)
        out.insert(i, succ)
        moved.append([str(old.id), str(succ.memory.id)])
    return moved


async def _successors_first(
    store: Store, asked: Asked, out: list[Candidate], superseded: list[UUID]
) -> dict[str, Any]:
    """Each superseded candidate's successor moved (or brought in) just above it, in ``out``."""
    successors = await store.successors(superseded)
    now = asked.clock()
    moved: list[list[str]] = []
    pulled = 0
    for old_id in superseded:
        new = successors.get(old_id)
        if new is None or not asked.filters.admits(new, now):
            continue
        i = next(k for k, c in enumerate(out) if c.memory.id == old_id)
        j = next((k for k, c in enumerate(out) if c.memory.id == new.id), None)
        if j is not None and j < i:
            continue
        if j is None:
            succ = Candidate(memory=new, score=out[i].score)
            pulled += 1
        else:
            succ = out.pop(j)
        succ.score = max(succ.score, out[i].score)
        out.insert(i, succ)
        moved.append([str(old_id), str(new.id)])
    return {"superseded": len(superseded), "moved_above": moved, "brought_in": pulled}


async def _both_sides(store: Store, asked: Asked, out: list[Candidate], conflicting: list[UUID]) -> int:
    """A candidate that contradicts memories no arm found brings them in just after it, with its
    score: the client sees both sides and can ask which holds. Returns how many came in."""
    present = {c.memory.id for c in out}
    wanted = {o for c in out if c.memory.conflicts_with for o in c.memory.conflicts_with}
    others = await store.memories_by_id(list(wanted - present))
    now = asked.clock()
    added = 0
    for mid in conflicting:
        i = next(k for k, c in enumerate(out) if c.memory.id == mid)
        for o in out[i].memory.conflicts_with or ():
            m = others.get(o)
            if (
                m is None
                or m.id in present
                or m.superseded_by is not None
                or not asked.filters.admits(m, now)
            ):
                continue
            out.insert(i + 1, Candidate(memory=m, score=out[i].score))
            present.add(m.id)
            added += 1
    return added
