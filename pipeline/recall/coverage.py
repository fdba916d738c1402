"""A step of stage 8 (``run.py``'s ``STAGE8_STEPS``): overview and order questions get the
project's arc, not one session.

"Give me a summary of how my project progressed", "in which order did I bring up the database,
the login and the deploy?": the arms rank the turns of the one session that says the most about the
question's words first, and ten turns of one afternoon answer neither. For such a question (its
words say so: ``asks_for_overview``), the first ``limit`` candidates are chosen across the
candidates' days: the best candidate of each day in turn, days ordered by their best candidate,
round after round, so a day gives a second memory only when every other day has given one. For a
question about an order ("in which order", "sequence", "timeline", "first ... then") those chosen
are then put in time order, oldest first. The rest follow in the order they had.

A day is the date a memory happened (``occurred_at``, else when it was stored): what a
conversation's sessions are in a store that knows no sessions.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import date

from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Candidate

_OVERVIEW = re.compile(
    r"\b(summar(?:y|ise|ize|ising|izing)|overview|recap|progress(?:ed|ion)?|timeline|so far|"
    r"over (?:the|these) (?:weeks|months|sessions|course)|evolv(?:e|ed)|developed over|"
    r"history of|from (?:the )?(?:start|beginning)|walk me through (?:everything|all)|"
    r"all the (?:steps|changes|decisions)|(?:in )?(?:what|which) order|order (?:in which|of)|sequence|"
    r"chronolog\w*)\b",
    re.I,
)
_ORDER = re.compile(
    r"\b((?:in )?(?:what|which) order|order (?:in which|of)|sequence|chronolog\w*|timeline|"
    r"first\b.*\bthen\b|before or after)\b",
    re.I,
)


def asks_for_overview(question: str) -> bool:
    return _OVERVIEW.search(question) is not None


def asks_for_order(question: str) -> bool:
    return _ORDER.search(question) is not None


def _day(c: Candidate) -> date:
    return c.memory.valid_from.date()


async def spread(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    question = ctx.request.query
    if not asks_for_overview(question):
        return Step(candidates, status="skipped: not an overview or order question")
    limit = ctx.request.limit
    by_day: dict[date, list[Candidate]] = defaultdict(list)
    for c in candidates:
        by_day[_day(c)].append(c)  # each day's in the order the stages gave
    if len(by_day) < 2:
        return Step(candidates, status="skipped: the candidates are of one day")
    days = list(by_day)  # ordered by each day's best candidate (dicts keep first insertion)
    chosen: list[Candidate] = []
    round_ = 0
    while len(chosen) < limit:
        took = False
        for d in days:
            if round_ < len(by_day[d]) and len(chosen) < limit:
                chosen.append(by_day[d][round_])
                took = True
        if not took:
            break
        round_ += 1
    ordered = asks_for_order(question)
    if ordered:
        chosen.sort(key=lambda c: (c.memory.valid_from, c.memory.position or 0, c.memory.created_at))
    picked = {c.memory.id for c in chosen}
    out = chosen + [c for c in candidates if c.memory.id not in picked]
    return Step(out, detail={"days": len(by_day), "chosen": len(chosen), "time_order": ordered})
