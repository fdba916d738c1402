"""A memory's event time: the time its content names, resolved against when it was said.

"Yesterday I went to the climbing gym", said on 9 June, happened on 8 June; "we moved to Berlin last
month", said in June, in May. The write path keeps that time beside ``occurred_at`` (migration
0014: ``event_start``, ``event_end``), so the temporal arm finds the memory for "what did she do on
June 8?", and a recall ``as_of`` a time finds it valid from when the event was (``Memory.began``).
Which of two statements is newer still goes by when they were said: "I joined Datadog last month",
said after "I now work at Stripe", is the newer one.

The question parser (``parser.py``) reads the content, with the time the memory was said as its
reference. Kept: ranges with both ends, of at most a year, that are not "recently" (a month before
any text that says it) or relative to another event ("after the launch"). Several ranges: the span
from the earliest to the latest when it is within a year, else the first.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from memlane.pipeline.time.parser import parse

# A range longer than this is no event's time ("in the 2010s").
MAX_SPAN = timedelta(days=366)
# A text longer than this is a document, whose dates are about many things.
MAX_CHARS = 2000
_VAGUE = frozenset({"recent", "event"})


def event_time(content: str, said_at: datetime) -> tuple[datetime, datetime] | None:
    """(start, end exclusive) of the time ``content`` names, said at ``said_at``, or None."""
    if len(content) > MAX_CHARS:
        return None
    ranges = [
        (r.start, r.end)
        for r in parse(content, said_at)
        if r.resolved
        and r.kind not in _VAGUE
        and r.start is not None
        and r.end is not None
        and r.end - r.start <= MAX_SPAN
    ]
    if not ranges:
        return None
    start, end = min(s for s, _ in ranges), max(e for _, e in ranges)
    return (start, end) if end - start <= MAX_SPAN else ranges[0]
