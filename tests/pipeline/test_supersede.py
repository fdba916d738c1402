"""Supersession: the offline detector's decisions on pairs of statements, and, through the engine,
what remember reports, what recall ranks first, and what forget gives back."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from uuid import uuid4

import psycopg
import pytest
from support.clients import call_ok

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall.current import asks_about_the_past
from memlane.pipeline.recall.query import Ablation
from memlane.pipeline.supersede import (
    Text,
    about_someone_else,
    answers_as_well,
    decide,
    judge,
    same_fact,
    subject,
    whose,
)
from memlane.server.cli.main import main

pytestmark = pytest.mark.anyio

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def text(content: str, day: int = 0) -> Text:
    return Text(id=uuid4(), content=content, valid_from=T0 + timedelta(days=day))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("Maya lives in Lisbon", "maya"),
        ("My sister Maya lives in Lisbon", "maya"),
        ("Maya's new place is in Berlin", "maya"),
        ("I work at Siemens", "i"),
        ("We deploy the API to Heroku", "we"),
        ("The standup is at 9am", "standup"),
        ("Tom moved to Porto", "tom"),
    ],
)
def test_the_subject_is_the_earliest_name_or_person(content, expected):
    assert subject(content) == expected


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My sister Maya lives in Lisbon", "Maya moved to Berlin for her new job"),
        ("We deploy the API to Heroku", "We moved our deploys to Fly.io"),
        ("I'm vegetarian", "I'm vegan now"),
        ("The standup is at 9am", "The standup moved to 10am"),
        ("Dana owns the billing service", "Priya took over the billing service"),
        ("I work at Siemens as an engineer", "I no longer work at Siemens, I joined Shopify"),
    ],
)
def test_a_newer_value_of_the_same_attribute_replaces_the_older(old, new):
    o, n = text(old, 0), text(new, 30)
    v = judge(n, o, similarity=0.6)
    assert v is not None and v.kind == "replaces" and (v.old, v.new) == (o.id, n.id)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Maya lives in Lisbon", "Tom lives in Lisbon"),  # another subject
        ("Maya lives in Lisbon", "Maya works at Siemens"),  # another attribute
        ("We have a dog named Miso", "We adopted a second dog, Pepper"),  # additive news
        ("Maya lives in Lisbon", "Maya still lives in Lisbon"),  # a restatement
        ("Dana owns the billing service", "Priya took over the search service"),  # another thing
        # "moved" a thing is no home, and "our own machines" no owner
        ("The Orion database lives in eu-west-1", "We moved the Orion pipelines off Jenkins onto CircleCI"),
        (
            "Priya runs the on-call rotation for Orion incidents",
            "CircleCI runs all Orion jobs now, on our own runners",
        ),
    ],
)
def test_look_alikes_additions_and_restatements_supersede_nothing(old, new):
    assert judge(text(new, 30), text(old, 0), similarity=0.7) is None


def test_a_statement_dated_earlier_never_supersedes_a_newer_one_it_is_superseded_instead():
    newer = text("Maya moved to Berlin", 30)
    late_but_older = text("Maya lives in Lisbon", 0)  # stored after, dated before
    [v] = decide(late_but_older, [(newer, 0.7)])
    assert (v.kind, v.old, v.new) == ("replaces", late_but_older.id, newer.id)


def test_a_denial_of_the_same_fact_is_a_conflict_not_a_replacement():
    v = judge(text("I never went to Japan", 5), text("I went to Japan in 2019", 0), similarity=0.7)
    assert v is not None and v.kind == "conflicts"


def test_dissimilar_texts_are_never_compared():
    assert judge(text("Maya moved to Berlin", 30), text("Maya lives in Lisbon", 0), similarity=0.2) is None


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


async def test_an_update_to_a_newer_value_supersedes_like_a_new_memory(engine):
    old = await engine.remember({"content": "The standup is at 9am", "project": "p"})
    note = await engine.remember({"content": "Bring snacks on Friday", "project": "p"})
    await engine.update(str(note.id), {"content": "The standup moved to 10am"})
    assert (await engine.store.get(old.id)).superseded_by == note.id


async def _maya(engine):
    lisbon = await engine.remember(
        {"content": "Maya lives in Lisbon", "project": "p", "occurred_at": "2024-01-10"}
    )
    berlin = await engine.remember(
        {"content": "Maya moved to Berlin for her new job", "project": "p", "occurred_at": "2025-06-01"}
    )
    assert [s.id for s in berlin.supersedes] == [lisbon.id]
    return lisbon, berlin


async def test_recall_as_of_a_date_puts_the_version_valid_then_first(engine):
    lisbon, berlin = await _maya(engine)
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


async def test_a_user_can_undo_and_redo_a_supersession(engine):
    lisbon, berlin = await _maya(engine)
    again = await engine.supersede(str(lisbon.id), None)
    assert again.superseded_by is None and again.valid_until is None
    redone = await engine.supersede(str(lisbon.id), str(berlin.id))
    assert redone.superseded_by == berlin.id
    with pytest.raises(InvalidInput, match="already supersedes"):
        await engine.supersede(str(berlin.id), str(lisbon.id))
    with pytest.raises(InvalidInput, match="itself"):
        await engine.supersede(str(berlin.id), str(berlin.id))
    other = await engine.remember({"content": "Tom lives in Porto", "project": "q"})
    with pytest.raises(InvalidInput, match="one project"):
        await engine.supersede(str(other.id), str(berlin.id))


@pytest.fixture
def cli(settings, capsys, monkeypatch):
    """``cli(*argv)``: memlane's command line on this test's database; its JSON result (the last
    line of stdout)."""
    monkeypatch.setenv("MEMLANE_DATABASE__URL", settings.database.url.get_secret_value())

    def run(*argv: str) -> dict:
        assert main(list(argv)) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    return run


def test_supersede_and_unsupersede_commands(cli, capsys):
    run = cli
    old = run("remember", "The standup is at 9am", "--occurred-at", "2026-01-05")
    new = run("remember", "The standup moved to 10am", "--occurred-at", "2026-02-02")
    assert [s["id"] for s in new["supersedes"]] == [old["id"]]
    current = run("unsupersede", old["id"])
    assert current["id"] == old["id"] and "superseded_by" not in current
    marked = run("supersede", old["id"][:8], new["id"][:8])
    assert marked["superseded_by"] == new["id"] and marked["valid_until"].startswith("2026-02-02")
    assert main(["supersede", old["id"], old["id"]]) != 0
    assert "cannot supersede itself" in capsys.readouterr().err


def test_export_and_import_carry_a_supersession_even_one_the_detector_would_not_make(cli, tmp_path):
    run = cli
    old = run("remember", "Our standup is in room 4.12", "--project", "src")
    new = run("remember", "Bring snacks on Friday", "--project", "src")
    run("supersede", old["id"], new["id"])  # a user's decision
    exported = tmp_path / "export.jsonl"
    assert main(["export", "--project", "src", "-o", str(exported)]) == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert any(line.get("superseded_by") == new["id"] for line in lines)
    copied = tmp_path / "copy.jsonl"
    copied.write_text("".join(json.dumps({**line, "project": "copy"}) + "\n" for line in lines))
    report = run("import", str(copied), "--json")
    assert report["stored"] == 2 and report["superseded"] == 1
    found = run(
        "recall", "standup room", "--project", "copy", "--json", "--include-history", "--as-of", "2999-01-01"
    )
    marked = [m for m in found["memories"] if m["content"] == "Our standup is in room 4.12"]
    assert marked and "superseded_by" in marked[0]


async def test_an_update_keeps_the_content_it_replaces_as_a_version_and_forget_drops_them(
    engine, database_url
):
    m = await engine.remember({"content": "The wifi password hint is the cat's name", "project": "p"})
    await engine.update(str(m.id), {"content": "The wifi password hint is the dog's name"})
    await engine.update(str(m.id), {"tags": ["home"]})
    await engine.update(str(m.id), {"priority": 4})  # not a change of what it says: no version
    h = await engine.history(str(m.id))
    assert [(v["version"], v["content"], list(v["tags"] or ())) for v in h["versions"]] == [
        (1, "The wifi password hint is the cat's name", []),
        (2, "The wifi password hint is the dog's name", []),
    ]
    assert h["memory"].tags == ("home",) and h["supersedes"] == [] and h["superseded_by"] is None
    await engine.forget(str(m.id))
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memory_versions").fetchone()[0] == 0


def test_history_command(cli):
    run = cli
    old = run("remember", "The standup is at 9am", "--occurred-at", "2026-01-05")
    new = run("remember", "The standup moved to 10am", "--occurred-at", "2026-02-02")
    h = run("history", new["id"][:8])
    assert h["memory"]["content"] == "The standup moved to 10am" and h["versions"] == []
    assert [s["id"] for s in h["supersedes"]] == [old["id"]] and h["superseded_by"] is None
    assert run("history", old["id"])["superseded_by"]["id"] == new["id"]


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


async def test_reports_of_events_and_a_batch_s_list_items_replace_and_contradict_nothing(engine):
    log = [
        {"content": f"Weekly sync {i}: the team reviewed ticket number {i}", "project": "p"} for i in range(6)
    ]
    out = await engine.remember_many(log)
    for i in range(6):
        single = await engine.remember(
            {"content": f"Weekly sync {10 + i}: the team reviewed ticket number {10 + i}", "project": "p"}
        )
        out.append(single)
    assert all(not r.supersedes and not r.conflicts and r.superseded_by is None for r in out)
    prices = await engine.remember_many(
        [
            {"content": f"The {size} plan costs ${price} a month", "project": "q"}
            for size, price in (("small", 5), ("large", 9))
        ]
    )
    assert all(not r.conflicts and not r.supersedes for r in prices)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Maya moved to Porto for a year.", "Maya's new place is in Berlin, in Kreuzberg.", True),
        ("I drink my coffee black.", "I drink my coffee with oat milk.", True),
        ("My partner is vegetarian.", "My partner works at Shopify as a designer.", False),
        ("Maya works at Siemens.", "Maya's sister Ana works at Siemens in Munich.", False),
        ("The team reviewed ticket 24.", "The team reviewed ticket 31.", False),  # two events
        ("Maya lives in Lisbon.", "Tom lives in Lisbon.", False),
    ],
)
def test_same_fact_is_one_subject_and_one_attribute(a, b, same):
    assert same_fact(a, b) is same
    assert same_fact(b, a) is same


@pytest.mark.parametrize(
    ("question", "person"),
    [
        ("Where does Priya work?", "priya"),
        ("What pet does Luca have?", "luca"),
        ("What car do I drive?", "i"),
        ("What did we do last week?", None),
        ("Where does Priya's husband work?", None),
        ("What is the release cadence?", None),
    ],
)
def test_whose_names_the_person_a_question_asks_about(question, person):
    assert whose(question) == person


def test_a_relative_s_fact_is_about_someone_else():
    assert about_someone_else("Priya's husband Arjun works at Spotify.", "priya") is True
    assert about_someone_else("Kenji's parents live in Nagoya.", "kenji") is True
    assert about_someone_else("Priya is a data scientist at Spotify.", "priya") is False
    assert about_someone_else("We use Grafana for dashboards.", "priya") is None


def test_a_newer_statement_answers_as_well_unless_it_drops_what_was_asked():
    assert answers_as_well("Where does Maya live?", "Maya lives in Lisbon.", "Maya's new place is in Berlin.")
    assert not answers_as_well(
        "When is my 1:1 with Marcus?",
        "My 1:1 with Marcus is on Mondays at 11:30.",
        "My 1:1 with Sofia is now every other Friday.",
    )
    assert not answers_as_well(
        "What terminal do I like?", "My favourite terminal is kitty.", "My editor of choice is Helix."
    )


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
