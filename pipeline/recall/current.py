"""A step of stage 8 (``run.py``'s ``STAGE8_STEPS``): what is current first (``pipeline/supersession/order.py``
decides the order: a person's own facts, a newer statement of one fact and a superseded memory's
successor above the older, both sides of a conflict, the memories valid ``as_of`` a time first)."""

from __future__ import annotations

from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Candidate
from memlane.pipeline.supersession import order


async def current_first(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    req = ctx.request
    asked = order.Asked(question=req.query, as_of=req.as_of, filters=req.filters, clock=ctx.clock)
    done = await order.current_first(ctx.store, asked, candidates)
    if done.skipped is not None:
        return Step(done.candidates, status=f"skipped: {done.skipped}")
    return Step(done.candidates, detail=done.detail)
