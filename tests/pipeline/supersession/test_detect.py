"""The offline detector's rules (pipeline/supersession/detect.py) on pairs of statements: the
subject, a replacement, a conflict, look-alikes, and recall's looser reads (same fact, whose, someone
else's, answers as well)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from memlane.pipeline.supersession.detect import (
    Text,
    about_someone_else,
    answers_as_well,
    covers,
    decide,
    judge,
    same_fact,
    statements,
    subject,
    whose,
)

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


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "Tidepool uses Redis for its cache and targets v0.3 in March",
            ["Tidepool uses Redis for its cache", "targets v0.3 in March"],
        ),
        (
            "Tidepool uses Redis as its cache. It targets v0.3 in March.",
            ["Tidepool uses Redis as its cache", "It targets v0.3 in March"],
        ),
        (
            "We deploy the API to Heroku; the frontend to Vercel",
            ["We deploy the API to Heroku", "the frontend to Vercel"],
        ),
        # a list's items, an opening setting, a number's comma: one statement
        ("Maya lives in Lisbon and Porto", ["Maya lives in Lisbon and Porto"]),
        ("From September, the standup is at 10am", ["From September, the standup is at 10am"]),
        ("My rent is €1,100 a month.", ["My rent is €1,100 a month"]),
        ("Tom and Jerry live in Porto", ["Tom and Jerry live in Porto"]),
        # when, where, as what: of the statement before
        ("I live in Porto, since May", ["I live in Porto, since May"]),
        (
            "I work at Siemens, in Munich, as a senior engineer",
            ["I work at Siemens, in Munich, as a senior engineer"],
        ),
    ],
)
def test_a_memory_is_read_as_its_statements(content, expected):
    assert statements(content) == expected


def test_a_newer_value_of_one_fact_of_several_leaves_the_memory_current():
    several = text("Tidepool uses Redis for its cache and targets v0.3 in March", 0)
    one = text("Tidepool uses Redis for its cache", 0)
    new = text("Tidepool switched its cache to sled", 30)
    assert not covers(new.content, several.content) and covers(new.content, one.content)
    assert judge(new, several, similarity=0.7) is None
    v = judge(new, one, similarity=0.7)
    assert v is not None and v.kind == "replaces"
    # Every statement of it replaced: replaced whole.
    both = text("Tidepool switched its cache to sled and targets v0.4 in May", 30)
    assert covers(both.content, several.content)
    v = judge(both, several, similarity=0.7)
    assert v is not None and (v.kind, v.old) == ("replaces", several.id)


def test_a_verb_that_only_ties_a_value_is_not_what_a_question_asks():
    assert answers_as_well(
        "What does Tidepool use for its cache?",
        "Tidepool uses Redis for its cache and targets v0.3 in March",
        "Tidepool switched its cache to sled",
    )
    assert not answers_as_well(
        "When does Tidepool target v0.3?",
        "Tidepool uses Redis for its cache and targets v0.3 in March",
        "Tidepool switched its cache to sled",
    )
