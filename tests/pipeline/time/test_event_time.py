"""Event time: the time a memory's content names, resolved against when it was said, kept at
write time (migration 0014), read by the temporal arm, shown by recall, filled in for older
memories by ``memlane maintain --task event_times``."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from memlane.pipeline import maintain
from memlane.pipeline.recall.query import Ablation, RecallQuery
from memlane.pipeline.recall.render import memory_view
from memlane.pipeline.time.events import event_time

pytestmark = pytest.mark.anyio

SAID = datetime(2023, 6, 9, 14, 0, tzinfo=UTC)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Yesterday I went to the climbing gym.", (day(2023, 6, 8), day(2023, 6, 9))),
        ("We moved to Berlin last month.", (day(2023, 5, 1), day(2023, 6, 1))),
        ("Next month I am going to Paris.", (day(2023, 7, 1), day(2023, 8, 1))),
        ("Last Saturday we painted the fence.", (day(2023, 6, 3), day(2023, 6, 4))),
        ("Recently I started pottery.", None),  # vague: a month before any text
        ("I met May at the park.", None),  # a name, not a month
        ("The cat sleeps on the sofa.", None),
    ],
)
def test_the_time_a_content_names_is_resolved_against_when_it_was_said(content, expected):
    assert event_time(content, SAID) == expected


async def _ask(engine, question: str, ref: str, **kw):
    req = RecallQuery.parse(
        engine.config, dict(query=question, project="p", reference_time=ref, limit=10, **kw)
    )
    return await engine.recall(req.model_copy(update={"count_accesses": False, "ablation": Ablation()}))


async def test_the_temporal_arm_finds_a_memory_by_the_day_its_content_names(engine):
    gym = await engine.remember(
        {
            "content": "Yesterday I went to the climbing gym with Jo.",
            "project": "p",
            "occurred_at": "2023-06-09T14:00:00Z",
        }
    )
    for n, (text, when) in enumerate(
        [
            ("I went to the climbing gym with Jo again.", "2023-07-20T10:00:00Z"),
            ("Jo and I tried the new climbing gym in town.", "2023-05-02T10:00:00Z"),
            ("The climbing gym raised its prices.", "2023-04-11T10:00:00Z"),
        ]
    ):
        await engine.remember({"content": text, "project": "p", "occurred_at": when, "position": n})
    stored = await engine.get(gym.id)
    assert (stored.event_start, stored.event_end) == (day(2023, 6, 8), day(2023, 6, 9))
    res = await _ask(engine, "What did I do on June 8, 2023?", "2023-08-01T00:00:00Z")
    assert res.ranked[0].memory.id == gym.id
    temporal = {s.stage: s for s in res.trace.stages}["retrieval"].detail["temporal"]
    assert temporal["own_hits"] >= 1
    # The client reads the day it happened beside the day it was said.
    view = memory_view(stored)
    assert view["date"] == "2023-06-09" and view["event"] == "2023-06-08"


async def test_an_update_of_the_content_or_its_date_resolves_the_event_time_again(engine):
    r = await engine.remember(
        {"content": "Yesterday I flew home.", "project": "p", "occurred_at": "2023-06-09"}
    )
    moved = await engine.update(str(r.id), {"occurred_at": "2023-07-01"})
    assert moved.event_start == day(2023, 6, 30)
    plain = await engine.update(str(r.id), {"content": "I flew home."})
    assert plain.event_start is None and plain.event_end is None


async def test_maintain_fills_in_event_times_of_older_memories_once(engine, database_url):
    r = await engine.remember({"content": "Last Saturday we painted the fence.", "occurred_at": "2023-06-09"})
    other = await engine.remember({"content": "The fence is green.", "occurred_at": "2023-06-09"})
    with psycopg.connect(database_url, autocommit=True) as conn:  # as a store from before 0014 has them
        conn.execute("UPDATE memories SET event_start = NULL, event_end = NULL")
        conn.execute("DELETE FROM memlane_settings WHERE key = %s", (maintain.EVENT_TIME_CURSOR,))
    [dry] = await maintain.maintain(engine, ["event_times"], dry_run=True)
    assert dry.summary == {"would_read": 2}
    assert (await engine.get(r.id)).event_start is None
    [done] = await maintain.maintain(engine, ["event_times"])
    assert done.summary == {"read": 2, "dated": 1}
    assert (await engine.get(r.id)).event_start == day(2023, 6, 3)
    assert (await engine.get(other.id)).event_start is None
    [again] = await maintain.maintain(engine, ["event_times"])
    assert again.summary == {"read": 0, "dated": 0}


async def test_as_of_reads_the_event_time_and_newer_still_goes_by_when_it_was_said(engine):
    old = await engine.remember({"content": "I work at Stripe.", "project": "p", "occurred_at": "2023-03-01"})
    new = await engine.remember(
        {"content": "I started work at Datadog last month.", "project": "p", "occurred_at": "2023-06-09"}
    )
    stored = await engine.get(new.id)
    assert stored.valid_from == day(2023, 6, 9) and stored.began == day(2023, 5, 1)
    assert stored.valid_from > (await engine.get(old.id)).valid_from  # said later: the newer one
    for as_of, valid in (("2023-05-15", True), ("2023-04-15", False)):
        res = await _ask(engine, "Where do I work?", "2023-08-01T00:00:00Z", as_of=as_of)
        then = {s.stage: s for s in res.trace.stages}["adjustments"].detail["current"]["valid_then"]
        assert new.id in [c.memory.id for c in res.ranked]
        assert (new.id in [c.memory.id for c in res.ranked[:then]]) is valid, as_of
