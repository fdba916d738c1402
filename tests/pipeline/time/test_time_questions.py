"""Questions that name a time, recalled end to end on real PostgreSQL: a compound expression is
one range ("in March last year" ranks that March first, not the whole year), and a question that
is only a time ("what happened in April?") gets the memories of that time first, never nothing."""

import pytest

from memlane.pipeline.recall.query import RecallQuery

pytestmark = pytest.mark.anyio

REF = "2024-06-12T10:00:00Z"  # a Wednesday; "last week" is 3-9 June 2024

APRIL_FIRST_WEEK = [
    ("Fixed the flaky checkout test in the payments repository", "2024-04-03T15:00:00Z"),
    ("Gave a talk about Rust error handling at the local meetup", "2024-04-05T19:00:00Z"),
]
APRIL_LATER = [
    ("Moved the team wiki to a new host", "2024-04-18T11:00:00Z"),
    ("The nightly backup job failed because the disk was full", "2024-04-25T03:00:00Z"),
]
LAST_WEEK = [
    ("The deploy of version 2.3 was rolled back after a memory leak", "2024-06-05T16:00:00Z"),
    ("Lunch with Priya to plan the third quarter roadmap", "2024-06-07T12:30:00Z"),
]
WEEK_BEFORE_LAST = [("Interviewed two candidates for the backend role", "2024-05-29T14:00:00Z")]
MARCH_LAST_YEAR = [
    ("We shipped the new onboarding flow for first-time users", "2023-03-14T10:00:00Z"),
    ("We shipped dark mode for the mobile app", "2023-03-28T10:00:00Z"),
]
REST_OF_LAST_YEAR = [
    ("We shipped the billing dashboard to all customers", "2023-07-10T10:00:00Z"),
    ("We shipped single sign-on for enterprise customers", "2023-10-02T10:00:00Z"),
    ("We shipped offline sync in the desktop client", "2023-12-05T10:00:00Z"),
    ("We shipped the public status page", "2023-01-20T10:00:00Z"),
]
OTHERS = [
    ("The user prefers dark mode in every editor", "2024-01-09T09:00:00Z"),
    ("Sam is allergic to peanuts", "2024-02-14T18:00:00Z"),
    ("The staging database password rotates every 90 days", "2024-05-21T09:00:00Z"),
    ("Renewed the TLS certificates for the API gateway", "2024-03-11T08:00:00Z"),
    ("Priya joined the platform team as tech lead", "2024-05-02T09:00:00Z"),
    ("We shipped the search autocomplete", "2024-03-20T10:00:00Z"),
]
MEMORIES = (
    APRIL_FIRST_WEEK
    + APRIL_LATER
    + LAST_WEEK
    + WEEK_BEFORE_LAST
    + MARCH_LAST_YEAR
    + REST_OF_LAST_YEAR
    + OTHERS
)


async def store(engine) -> None:
    await engine.remember_many(
        [{"content": c, "occurred_at": when, "project": "journal"} for c, when in MEMORIES]
    )


async def ask(engine, question: str, **kw):
    req = RecallQuery.parse(
        engine.config, dict(query=question, project="journal", reference_time=REF, limit=10, **kw)
    )
    return await engine.recall(req.model_copy(update={"count_accesses": False}))


def texts(pairs) -> list[str]:
    return [c for c, _ in pairs]


def chosen(res) -> list[str]:
    return [m.content for m, _ in res.memories]


async def test_march_last_year_ranks_that_march_before_the_rest_of_the_year(engine):
    await store(engine)
    res = await ask(engine, "What did we ship in March last year?")
    got = chosen(res)
    assert set(got[:2]) == set(texts(MARCH_LAST_YEAR)), got
    # The rest of last year is not in the range: no boost for it.
    for c in res.ranked:
        if c.memory.content in texts(REST_OF_LAST_YEAR):
            assert "temporal" not in c.arm_scores
    note = {s.stage: s for s in res.trace.stages}["retrieval"].detail["temporal"]
    assert [(r["text"], r["start"][:10], r["end"][:10]) for r in note["ranges"]] == [
        ("in March last year", "2023-03-01", "2023-04-01")
    ]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("What happened in April?", APRIL_FIRST_WEEK + APRIL_LATER),
        ("What was going on in April?", APRIL_FIRST_WEEK + APRIL_LATER),
        ("What did I do the first week of April?", APRIL_FIRST_WEEK),
        ("What went wrong last week?", LAST_WEEK),
        ("Anything new last week?", LAST_WEEK),
        ("What did we do the week before last?", WEEK_BEFORE_LAST),
        ("What did I work on in April?", APRIL_FIRST_WEEK + APRIL_LATER),
    ],
)
async def test_a_question_that_is_only_a_time_gets_that_time_first_and_never_nothing(
    engine, question, expected
):
    await store(engine)
    res = await ask(engine, question)
    got = chosen(res)
    assert got, f"{question!r} came back empty"
    assert set(got[: len(expected)]) == set(texts(expected)), got


async def test_a_topic_in_a_time_range_is_never_dropped_for_its_weak_cosine(engine):
    done = await engine.remember_many(
        [
            {
                "content": "Incident: the payment webhook timed out for two hours",
                "occurred_at": "2024-05-14",
                "project": "ops",
            },
            {"content": "Lunch with Priya about the roadmap", "occurred_at": "2024-05-20", "project": "ops"},
            {"content": "The user prefers dark mode", "occurred_at": "2024-01-10", "project": "ops"},
        ]
    )
    for question in ("What incidents did we have in May?", "What incidents did we have in May 2024?"):
        req = RecallQuery.parse(
            engine.config, {"query": question, "project": "ops", "reference_time": "2024-12-01T00:00:00Z"}
        )
        res = await engine.recall(req.model_copy(update={"count_accesses": False}))
        assert res.memories and res.memories[0][0].id == done[0].id, question
