"""Stage 8's orderings for chats: an overview or order question spread over the days of a
project (time order for an order), and a user's statement above the assistant's reply that echoes
it; over a real store."""

from __future__ import annotations

import pytest

from memlane.pipeline.recall.coverage import asks_for_order, asks_for_overview
from memlane.pipeline.recall.query import Ablation, RecallQuery

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("question", "overview", "order"),
    [
        ("Can you give me a summary of how my project progressed?", True, False),
        ("In which order did I bring up the login, the charts and the deploy?", True, True),
        ("What's the timeline of the migration?", True, True),
        ("Which database does the app use?", False, False),
        ("How do I order the results by date in SQL?", False, False),
    ],
)
def test_overview_and_order_questions_are_told_apart(question, overview, order):
    assert asks_for_overview(question) is overview
    assert asks_for_order(question) is order


DAYS = {
    "2024-03-01": [
        "user: I started the budget tracker app in Flask with a SQLite database.",
        "user: The budget tracker app needs a Flask form for expenses.",
        "user: In the budget tracker app the SQLite schema has an expenses table.",
        "user: The budget tracker app stores categories in SQLite too.",
    ],
    "2024-03-08": ["user: I added login to the budget tracker app with Flask-Login."],
    "2024-03-15": ["user: I added monthly charts to the budget tracker app."],
    "2024-03-22": ["user: I deployed the budget tracker app to a VPS with gunicorn."],
}


async def _store(engine) -> dict[str, str]:
    ids = {}
    for day, texts in DAYS.items():
        for t in texts:
            ids[t] = str((await engine.remember({"content": t, "project": "p", "occurred_at": day})).id)
    return ids


async def _ask(engine, question: str, limit: int = 4):
    req = RecallQuery.parse(engine.config, {"query": question, "project": "p", "limit": limit})
    return await engine.recall(req.model_copy(update={"count_accesses": False, "ablation": Ablation()}))


async def test_an_overview_question_gets_every_day_and_an_order_question_time_order(engine):
    await _store(engine)
    res = await _ask(engine, "Give me a summary of how my budget tracker app progressed")
    first = [c.memory for c in res.ranked[:4]]
    assert len({m.occurred_at.date() for m in first}) == 4, [m.content for m in first]
    detail = {s.stage: s for s in res.trace.stages}["adjustments"].detail
    assert detail["coverage"]["days"] == 4 and not detail["coverage"]["time_order"]
    ordered = await _ask(engine, "In which order did I work on the budget tracker app?")
    dates = [c.memory.occurred_at for c in ordered.ranked[:4]]
    assert dates == sorted(dates) and len(set(dates)) == 4
    plain = await _ask(engine, "What does the budget tracker app store in SQLite?")
    detail = {s.stage: s for s in plain.trace.stages}["adjustments"].detail
    assert detail["coverage"] == "skipped: not an overview or order question"


async def test_a_user_statement_goes_above_the_reply_that_echoes_it(engine):
    said = await engine.remember({"content": "user: Let's end the first sprint on March 29.", "project": "p"})
    reply = await engine.remember(
        {
            "content": "assistant: Here is a sprint plan for the first sprint, ending on March 29: "
            "week one covers the login, week two the charts, and the first sprint review is on March 29.",
            "project": "p",
        }
    )
    other = await engine.remember({"content": "user: The second sprint starts in April.", "project": "p"})
    # Only the keyword arm, where the longer reply, with "sprint" three times, ranks first.
    req = RecallQuery.parse(engine.config, {"query": "first sprint end", "project": "p"})
    res = await engine.recall(
        req.model_copy(update={"count_accesses": False, "ablation": Ablation(arms=("keyword",))})
    )
    ranked = [c.memory.id for c in res.ranked]
    assert ranked.index(said.id) < ranked.index(reply.id)  # both kept, the statement first
    detail = {s.stage: s for s in res.trace.stages}["adjustments"].detail["echoes"]
    assert detail["moved_above"] == [[str(said.id), str(reply.id)]]
    assert other.id not in [c.memory.id for c in res.ranked][:1]
