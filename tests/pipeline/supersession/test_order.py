"""Recall's ordering by supersession (pipeline/supersession/order.py, run in stage 8 by
pipeline/recall/current.py): successors above what they replaced, a newer statement of one fact and
a person's own facts first, the past's questions left alone, ``as_of``, ``include_history`` and both
sides of a conflict."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.clients import call_ok

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall.query import Ablation
from memlane.pipeline.supersession.order import asks_about_the_past

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("question", "past"),
    [
        ("Where does Maya live?", False),
        ("Where does Maya live now?", False),
        ("Where did Maya live before Berlin?", True),
        ("Which host did we use previously?", True),
        ("What was the price in 2024?", True),
    ],
)
def test_questions_about_the_past_are_told_apart(question, past):
    assert asks_about_the_past(question) is past


async def test_remember_reports_what_it_supersedes_and_recall_answers_with_the_newer(engine):
    old = await engine.remember(
        {"content": "My sister Maya lives in Lisbon", "project": "p", "occurred_at": "2026-01-10"}
    )
    other = await engine.remember(
        {"content": "Tom lives in Lisbon", "project": "p", "occurred_at": "2026-01-11"}
    )
    new = await engine.remember(
        {"content": "Maya moved to Berlin for her new job", "project": "p", "occurred_at": "2026-05-02"}
    )
    assert [s.id for s in new.supersedes] == [old.id] and not new.conflicts
    assert new.supersedes[0].content == "My sister Maya lives in Lisbon"
    stored = await engine.store.get(old.id)
    assert stored.superseded_by == new.id and stored.valid_until == datetime(2026, 5, 2, tzinfo=UTC)
    assert (await engine.store.get(other.id)).superseded_by is None  # a look-alike is left alone

    res = await engine.recall({"query": "Where does Maya live?", "project": "p", "count_accesses": False})
    ranked = [m.id for m, _ in res.memories]
    assert ranked.index(new.id) < ranked.index(old.id)
    past = await engine.recall(
        {"query": "Where did Maya live before?", "project": "p", "count_accesses": False}
    )
    assert old.id in [m.id for m, _ in past.memories][:3]
    stage = {s.stage: s for s in res.trace.stages}["adjustments"]
    assert stage.detail["current"]["moved_above"] == [[str(old.id), str(new.id)]]

    # Forgetting the newer fact makes the older one current again.
    await engine.forget(str(new.id))
    again = await engine.store.get(old.id)
    assert again.superseded_by is None and again.valid_until is None


async def test_a_recall_brings_in_the_successor_no_arm_found(engine):
    old = await engine.remember({"content": "We deploy the API to Heroku", "project": "p"})
    new = await engine.remember({"content": "We moved our deploys to Fly.io", "project": "p"})
    assert [s.id for s in new.supersedes] == [old.id]
    # Only the keyword arm runs, and only the old wording shares the question's rare word.
    res = await engine.recall(
        {"query": "Heroku", "project": "p", "count_accesses": False, "ablation": Ablation(arms=("keyword",))}
    )
    ranked = [m.id for m, _ in res.memories]
    assert ranked[:2] == [new.id, old.id]


async def test_recall_as_of_a_date_puts_the_version_valid_then_first(engine, maya):
    lisbon, berlin = await maya()
    ask = {"query": "Where does Maya live?", "project": "p", "count_accesses": False}
    then = await engine.recall({**ask, "as_of": "2024-08-01"})
    assert [m.id for m, _ in then.memories][0] == lisbon.id
    now = await engine.recall({**ask, "as_of": "2025-08-01"})
    assert [m.id for m, _ in now.memories][0] == berlin.id
    with pytest.raises(InvalidInput, match="as_of"):
        await engine.recall({**ask, "as_of": "not a date"})


async def test_recall_include_history_returns_the_earlier_versions_and_marks_the_old(connect):
    async with connect() as client:
        first = await call_ok(
            client, "remember", {"content": "Maya lives in Lisbon", "occurred_at": "2024-01-10"}
        )
        second = await call_ok(
            client,
            "remember",
            {"content": "Maya moved to Berlin for her new job", "occurred_at": "2025-06-01"},
        )
        assert [s["id"] for s in second["supersedes"]] == [first["id"]]
        res = await call_ok(client, "recall", {"query": "Where does Maya live?", "include_history": True})
    top, *rest = res["memories"]
    assert top["content"].startswith("Maya moved to Berlin")
    assert top["history"] == [
        {
            "id": first["id"][:8],
            "content": "Maya lives in Lisbon",
            "date": "2024-01-10",
            "valid_until": "2025-06-01",
        }
    ]
    old = next(m for m in rest if m["content"] == "Maya lives in Lisbon")
    assert old["superseded_by"] == second["id"][:8] and old["valid_until"] == "2025-06-01"


async def test_a_contradiction_is_kept_on_both_sides_shown_by_recall_and_cleared_by_forget(connect, engine):
    async with connect() as client:
        went = await call_ok(
            client, "remember", {"content": "I went to Japan in 2019", "occurred_at": "2024-03-01"}
        )
        never = await call_ok(
            client, "remember", {"content": "I never went to Japan", "occurred_at": "2024-03-01"}
        )
        assert [c["id"] for c in never["conflicts"]] == [went["id"]] and never["supersedes"] == []
        res = await call_ok(client, "recall", {"query": "Have I ever been to Japan?"})
    marks = {m["content"]: m.get("conflict") for m in res["memories"]}
    assert marks["I went to Japan in 2019"] == [never["id"][:8]]
    assert marks["I never went to Japan"] == [went["id"][:8]]
    await engine.forget(went["id"])
    assert (await engine.get(never["id"])).conflicts_with is None


async def test_recall_puts_a_newer_statement_of_the_same_fact_and_the_person_s_own_first(engine):
    """Not marked at write time (no change said, worded apart), still answered first for a question
    about the present; the past keeps the stages' order; a relative's fact goes below the person's."""
    p = {"project": "p"}
    old = await engine.remember({**p, "content": "My coffee is black.", "occurred_at": "2023-05-02"})
    partner = await engine.remember(
        {**p, "content": "My partner drinks coffee with sugar.", "occurred_at": "2023-06-01"}
    )
    new = await engine.remember(
        {**p, "content": "My coffee comes with a splash of oat milk.", "occurred_at": "2024-09-20"}
    )
    assert not new.supersedes  # nothing said it changed: write time does not mark it
    q = {"project": "p", "count_accesses": False}
    # Only the keyword arm, where the shorter, older wording ranks first.
    res = await engine.recall({**q, "query": "my coffee", "ablation": Ablation(arms=("keyword",))})
    ranked = [m.id for m, _ in res.memories]
    assert ranked[0] == new.id and ranked.index(old.id) < ranked.index(partner.id), ranked
    detail = {s.stage: s for s in res.trace.stages}["adjustments"].detail["current"]
    assert isinstance(detail, dict) and [str(old.id), str(new.id)] in detail["newer_first"], detail
    past = await engine.recall({**q, "query": "How did I take my coffee before?"})
    assert "newer_first" not in {s.stage: s for s in past.trace.stages}["adjustments"].detail.get(
        "current", {}
    )
    theirs = await engine.recall({**q, "query": "How does my partner take coffee?"})
    assert [m.id for m, _ in theirs.memories][0] == partner.id
