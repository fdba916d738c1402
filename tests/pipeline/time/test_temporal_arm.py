"""The temporal arm on a small store of assistant-style memories (decisions, incidents, people)
with occurred_at spread over months and a fixed reference time: questions with a time range get
the in-range memories first; questions without one recall exactly as without the arm."""

from datetime import UTC, datetime

import pytest

from memlane.pipeline.config import TemporalConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.recall import arms
from memlane.pipeline.recall.query import Ablation, RecallQuery

pytestmark = pytest.mark.anyio

REF = "2024-03-20T10:00:00Z"  # a Wednesday; "last week" is 11-17 March 2024

MEMORIES = [
    ("We decided to move the billing API to PostgreSQL 16", "2024-03-12T15:00:00Z"),
    ("We decided to drop the Redis cache for user sessions", "2023-11-08T09:00:00Z"),
    ("We decided to manage the staging cluster with Terraform", "2024-01-15T11:00:00Z"),
    ("We decided to pin the Elasticsearch version to 8.11", "2024-01-30T16:00:00Z"),
    ("Decided with Priya that releases go out on Tuesdays", "2023-07-04T10:00:00Z"),
    ("Incident: the payment webhook timed out for two hours", "2023-06-14T03:00:00Z"),
    ("Incident: the log server disk filled up and logging stopped", "2023-06-27T22:00:00Z"),
    ("Incident: login outage caused by an expired TLS certificate", "2023-09-03T08:00:00Z"),
    ("Incident: the search index was corrupted after the upgrade", "2024-02-02T13:00:00Z"),
    ("Incident: the CI runners ran out of memory during the nightly build", "2024-03-05T02:00:00Z"),
    ("The user prefers dark mode in every editor", "2023-05-02T12:00:00Z"),
    ("Priya joined the platform team as tech lead", "2023-08-21T09:00:00Z"),
    ("The quarterly planning meeting moved to Thursdays", "2024-02-20T14:00:00Z"),
    ("Sam is allergic to peanuts", "2023-10-10T18:00:00Z"),
    ("The staging database password rotates every 90 days", "2023-12-01T09:00:00Z"),
]


def stages(res) -> dict:
    return {s.stage: s for s in res.trace.stages}


async def store(engine) -> dict[str, str]:
    done = await engine.remember_many(
        [{"content": c, "occurred_at": when, "project": "assistant"} for c, when in MEMORIES]
    )
    return {c: str(r.id) for (c, _), r in zip(MEMORIES, done, strict=True)}


async def ask(engine, question: str, arms=None, **kw):
    req = RecallQuery.parse(
        engine.config, dict(query=question, project="assistant", reference_time=REF, limit=10, **kw)
    )
    return await engine.recall(
        req.model_copy(update={"count_accesses": False, "ablation": Ablation(arms=arms)})
    )


def contents(res) -> list[str]:
    return [c.memory.content for c in res.ranked]


async def test_last_week_puts_the_decision_of_last_week_first(engine):
    await store(engine)
    res = await ask(engine, "What did we decide last week?")
    assert contents(res)[0] == "We decided to move the billing API to PostgreSQL 16"
    st = stages(res)
    note = st["retrieval"].detail["temporal"]
    assert note["ranges"][0]["start"] == "2024-03-11T00:00:00+00:00"
    assert note["ranges"][0]["end"] == "2024-03-18T00:00:00+00:00"
    assert st["retrieval"].detail["arms"]["temporal"] >= 1
    assert note["question_rest"] == "What did we decide ?"
    [r] = st["intent"].detail["intent"]["time_ranges"]
    assert (r["text"], r["kind"]) == ("last week", "week")
    # Without the arm the week is not what decides the order.
    plain = await ask(engine, "What did we decide last week?", arms=("vector", "keyword"))
    assert contents(plain)[0] != "We decided to move the billing API to PostgreSQL 16"


async def test_incidents_in_june_come_before_the_other_incidents(engine):
    await store(engine)
    res = await ask(engine, "incidents in June")
    june = {
        "Incident: the payment webhook timed out for two hours",
        "Incident: the log server disk filled up and logging stopped",
    }
    assert set(contents(res)[:2]) == june
    assert all(c.arm_scores.get("temporal") == 1.0 for c in res.ranked[:2])
    assert not any(c.arm_scores.get("temporal") for c in res.ranked[2:])
    # The other incidents are still there, after the June ones: a boost, not a filter.
    assert "Incident: login outage caused by an expired TLS certificate" in contents(res)[2:]


async def test_a_range_finds_in_range_memories_the_other_arms_missed(engine):
    ids = await store(engine)
    res = await ask(engine, "What happened between June and July 2023?")
    note = stages(res)["retrieval"].detail["temporal"]
    assert note["scanned"] == 3  # the two June incidents and the Tuesday decision
    in_range = {ids[c] for c, when in MEMORIES if when.startswith(("2023-06", "2023-07"))}
    top = {str(c.memory.id) for c in res.ranked[: len(in_range)]}
    assert top == in_range


async def test_the_week_before_an_event_is_anchored_on_the_memory_of_the_event(engine):
    ids = await store(engine)
    res = await ask(engine, "What did we decide the week before the search index was corrupted?")
    note = stages(res)["retrieval"].detail["temporal"]
    [r] = note["ranges"]
    assert (
        r["kind"] == "event"
        and r["anchor"]["id"] == ids["Incident: the search index was corrupted after the upgrade"]
    )
    assert (r["start"], r["end"]) == ("2024-01-26T00:00:00+00:00", "2024-02-03T00:00:00+00:00")
    order = contents(res)
    # The event itself is not boosted; the decision of that week comes before every other decision.
    decisions = [c for c in order if "ecided" in c]
    assert decisions[0] == "We decided to pin the Elasticsearch version to 8.11"
    assert order.index(decisions[0]) <= 1
    event = next(c for c in res.ranked if c.memory.content.startswith("Incident: the search index"))
    assert "temporal" not in event.arm_scores


async def test_an_event_no_memory_matches_is_said_and_the_arm_adds_nothing(engine):
    await store(engine)
    res = await ask(engine, "What did we decide the day after the volcano eruption in Iceland?")
    note = stages(res)["retrieval"].detail["temporal"]
    assert note["status"] == "not run: no range could be placed"
    assert "no memory matches the event" in note["unresolved"][0]["why"]
    assert "temporal" not in stages(res)["retrieval"].detail["arms"]


@pytest.mark.parametrize(
    "question",
    ["Which editor theme does the user like?", "Who leads the platform team?", "What is Sam allergic to?"],
)
async def test_without_a_time_expression_recall_is_unchanged(engine, question):
    await store(engine)
    with_arm = await ask(engine, question)
    without = await ask(engine, question, arms=tuple(a for a in arms.names() if a != "temporal"))
    assert [(str(c.memory.id), round(c.score, 9)) for c in with_arm.ranked] == [
        (str(c.memory.id), round(c.score, 9)) for c in without.ranked
    ]
    st = stages(with_arm)["retrieval"]
    assert st.detail["temporal"] == "not run: no time expression in the question"
    assert "temporal" not in st.detail["arms"]


async def test_the_arm_can_be_switched_off(engine_config, embedder):
    cfg = engine_config.model_copy(update={"temporal": TemporalConfig(enabled=False)})
    eng = Engine(cfg, embedder=embedder)
    await eng.open()
    try:
        await store(eng)
        res = await ask(eng, "incidents in June")
    finally:
        await eng.close()
    st = stages(res)
    assert st["retrieval"].detail["temporal"] == "not run: [temporal] enabled = false"
    assert st["intent"].detail["intent"]["time_ranges"][0]["text"] == "in June"  # still parsed


async def test_memories_without_occurred_at_and_other_projects_are_never_in_range(engine):
    await store(engine)
    await engine.remember({"content": "Incident: the VPN dropped all connections", "project": "assistant"})
    await engine.remember(
        {
            "content": "Incident: a June incident of another project",
            "project": "other",
            "occurred_at": "2023-06-10",
        }
    )
    res = await ask(engine, "incidents in June")
    for c in res.ranked:
        assert c.memory.project == "assistant"
        if c.arm_scores.get("temporal"):
            assert c.memory.occurred_at is not None and c.memory.occurred_at.month == 6
    assert (
        datetime(2023, 6, 1, tzinfo=UTC)
        <= res.ranked[0].memory.occurred_at
        < datetime(2023, 7, 1, tzinfo=UTC)
    )


async def test_over_mcp_the_trace_shows_the_parsed_range_and_the_temporal_hits(connect):
    async with connect() as client:
        for content, when in MEMORIES:
            r = await client.call_tool(
                "remember", {"content": content, "occurred_at": when, "project": "assistant"}
            )
            assert r.is_error is False
        r = await client.call_tool(
            "recall",
            {
                "query": "incidents in June",
                "project": "assistant",
                "reference_time": REF,
                "explain": True,
            },
        )
    assert r.is_error is False, r.content[0].text
    res = r.structured_content
    by_stage = {s["stage"]: s for s in res["trace"]["stages"]}
    [parsed] = by_stage["intent"]["detail"]["intent"]["time_ranges"]
    assert parsed == {
        "text": "in June",
        "kind": "month",
        "start": "2023-06-01T00:00:00+00:00",
        "end": "2023-07-01T00:00:00+00:00",
    }
    assert by_stage["retrieval"]["detail"]["arms"]["temporal"] == 2
    assert [m["content"] for m in res["memories"][:2]] == [
        "Incident: the log server disk filled up and logging stopped",
        "Incident: the payment webhook timed out for two hours",
    ]
