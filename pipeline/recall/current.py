"""After stage 8: what is current first. A candidate that a newer memory superseded
(``superseded_by``, migration 0013) never ranks above the memory at the end of its chain for a
question about the present: that memory is moved (or, when no arm found it, brought in) just above
it, with at least its score. The older one stays in the list: it still answers "what was it before?".
A candidate that contradicts memories no arm found (``conflicts_with``) brings them in after it:
the client sees both sides, each marked ``conflict``.

A question about the past ("before", "used to", "previously", "originally", a year) keeps the
order the stages gave, in which the older wording usually matches best. A recall ``as_of`` a time
puts the memories valid then first (their value started by then and was not yet replaced), in the
order the stages gave, and the rest after them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from uuid import UUID

from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Candidate, Memory

# Words that ask about an earlier state than today's.
_PAST = re.compile(
    r"\b(before|used to|previous(ly)?|originally|original|formerly|former|earlier|at first|"
    r"back then|back in|ago|until|prior|old|first|last time|(19|20)\d\d)\b",
    re.I,
)


def asks_about_the_past(question: str) -> bool:
    return _PAST.search(question) is not None


def valid_at(m: Memory, when: datetime) -> bool:
    """Whether ``m``'s value held at ``when``: it started by then and was not yet replaced."""
    return m.valid_from <= when and (m.valid_until is None or m.valid_until > when)


async def current_first(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    as_of = ctx.request.as_of
    if as_of is not None:
        then = [c for c in candidates if valid_at(c.memory, as_of)]
        later = [c for c in candidates if not valid_at(c.memory, as_of)]
        return Step(then + later, detail={"as_of": as_of.isoformat(), "valid_then": len(then)})
    superseded = [c.memory.id for c in candidates if c.memory.superseded_by is not None]
    conflicting = [c.memory.id for c in candidates if c.memory.conflicts_with]
    if not superseded and not conflicting:
        return Step(candidates, status="skipped: nothing superseded or in conflict among the candidates")
    out = list(candidates)
    detail: dict[str, Any] = {}
    if superseded and not asks_about_the_past(ctx.request.query):
        detail.update(await _successors_first(ctx, out, superseded))
    if conflicting:
        detail["conflicts_brought_in"] = await _both_sides(ctx, out, conflicting)
    if not detail:
        return Step(candidates, status="skipped: a question about the past")
    return Step(out, detail=detail)


async def _successors_first(
    ctx: RecallContext, out: list[Candidate], superseded: list[UUID]
) -> dict[str, Any]:
    """Each superseded candidate's successor moved (or brought in) just above it, in ``out``."""
    successors = await ctx.store.successors(superseded)
    now = ctx.clock()
    moved: list[list[str]] = []
    pulled = 0
    for old_id in superseded:
        new = successors.get(old_id)
        if new is None or not ctx.request.filters.admits(new, now):
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


async def _both_sides(ctx: RecallContext, out: list[Candidate], conflicting: list[UUID]) -> int:
    """A candidate that contradicts memories no arm found brings them in just after it, with its
    score: the client sees both sides and can ask which holds. Returns how many came in."""
    present = {c.memory.id for c in out}
    wanted = {o for c in out if c.memory.conflicts_with for o in c.memory.conflicts_with}
    others = await ctx.store.memories_by_id(list(wanted - present))
    now = ctx.clock()
    added = 0
    for mid in conflicting:
        i = next(k for k, c in enumerate(out) if c.memory.id == mid)
        for o in out[i].memory.conflicts_with or ():
            m = others.get(o)
            if (
                m is None
                or m.id in present
                or m.superseded_by is not None
                or not ctx.request.filters.admits(m, now)
            ):
                continue
            out.insert(i + 1, Candidate(memory=m, score=out[i].score))
            present.add(m.id)
            added += 1
    return added
