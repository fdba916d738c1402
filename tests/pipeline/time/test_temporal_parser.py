"""The time-expression parser (pipeline/time/parser.py): what it reads as a range, relative to a fixed
reference time, and what it must not read as one."""

from datetime import UTC, datetime

import pytest

from memlane.pipeline.recall.intent import analyse_offline, from_llm
from memlane.pipeline.time import parser as temporal

REF = datetime(2023, 11, 15, 14, 30, tzinfo=UTC)  # a Wednesday


def d(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=UTC)


# question -> (matched phrase, kind, start, end) of its one expression
TRUE_POSITIVES = {
    "what happened yesterday?": ("yesterday", "day", "2023-11-14", "2023-11-15"),
    "anything due today": ("today", "day", "2023-11-15", "2023-11-16"),
    "what did we decide last week": ("last week", "week", "2023-11-06", "2023-11-13"),
    "what is planned this week": ("this week", "week", "2023-11-13", "2023-11-20"),
    "what did I say two weeks ago": ("two weeks ago", "week", "2023-10-30", "2023-11-06"),
    "the deploy 3 days ago": ("3 days ago", "day", "2023-11-12", "2023-11-13"),
    "incidents in June": ("in June", "month", "2023-06-01", "2023-07-01"),
    "what broke in December?": ("in December", "month", "2022-12-01", "2023-01-01"),  # not after REF
    "incidents in June 2022": ("in June 2022", "month", "2022-06-01", "2022-07-01"),
    "the June 2023 outage": ("June 2023", "month", "2023-06-01", "2023-07-01"),
    "where did we go last spring": ("last spring", "season", "2023-03-01", "2023-06-01"),
    "last summer's trip": ("last summer", "season", "2023-06-01", "2023-09-01"),
    "what we did last winter": ("last winter", "season", "2022-12-01", "2023-03-01"),
    "in the summer of 2021": ("in the summer of 2021", "season", "2021-06-01", "2021-09-01"),
    "the talk in the fall of 2022": ("in the fall of 2022", "season", "2022-09-01", "2022-12-01"),
    "goals from last year": ("last year", "year", "2022-01-01", "2023-01-01"),
    "goals for this year": ("this year", "year", "2023-01-01", "2024-01-01"),
    "what shipped in 2021": ("in 2021", "year", "2021-01-01", "2022-01-01"),
    "releases between March and May": ("between March and May", "span", "2023-03-01", "2023-06-01"),
    "what happened from May to July 2022": ("from May to July 2022", "span", "2022-05-01", "2022-08-01"),
    "between 2019 and 2021": ("between 2019 and 2021", "span", "2019-01-01", "2022-01-01"),
    "decisions before June 2023": ("before June 2023", "before", None, "2023-06-01"),
    "what changed after May 7": ("after May 7", "after", "2023-05-08", None),
    "everything since 2021": ("since 2021", "since", "2021-01-01", None),
    "notes until March 3, 2023": ("until March 3, 2023", "before", None, "2023-03-04"),
    "what did I read recently": ("recently", "recent", "2023-10-17", "2023-11-16"),
    "how has she been lately": ("lately", "recent", "2023-10-17", "2023-11-16"),
    "bills from last month": ("last month", "month", "2023-10-01", "2023-11-01"),
    "what did we fix earlier this month": ("earlier this month", "month", "2023-11-01", "2023-11-16"),
    "the meeting on 2023-05-07": ("on 2023-05-07", "day", "2023-05-07", "2023-05-08"),
    "the call on May 7": ("on May 7", "day", "2023-05-07", "2023-05-08"),
    "the call on 7 May 2022": ("on 7 May 2022", "day", "2022-05-07", "2022-05-08"),
    "the painting shown on October 13, 2023": ("on October 13, 2023", "day", "2023-10-13", "2023-10-14"),
    "what did Gina find on 1 February, 2023": ("on 1 February, 2023", "day", "2023-02-01", "2023-02-02"),
    "the week before August 3, 2023": ("the week before August 3, 2023", "span", "2023-07-27", "2023-08-03"),
    "the puppy she got two weeks before August 11, 2023": (
        "two weeks before August 11, 2023",
        "span",
        "2023-07-28",
        "2023-08-11",
    ),
    "the day after Dec 24, 2022": ("the day after Dec 24, 2022", "span", "2022-12-25", "2022-12-26"),
    "what did we do last weekend": ("last weekend", "weekend", "2023-11-11", "2023-11-13"),
    "the standup on Monday": ("on Monday", "day", "2023-11-13", "2023-11-14"),
    "the review last Wednesday": ("last Wednesday", "day", "2023-11-08", "2023-11-09"),
    "errors in the last 3 days": ("in the last 3 days", "recent", "2023-11-13", "2023-11-16"),
    "over the past few weeks": ("over the past few weeks", "recent", "2023-10-26", "2023-11-16"),
    "What activity did Maria do in May 2023?": ("in May 2023", "month", "2023-05-01", "2023-06-01"),
    "what did she paint in March": ("in March", "month", "2023-03-01", "2023-04-01"),
    "the 03/15/2023 release": ("03/15/2023", "day", "2023-03-15", "2023-03-16"),
}

# Compound expressions: one range for the whole phrase, never a union of its parts.
COMPOUNDS = {
    "what did we ship in March last year?": ("in March last year", "month", "2022-03-01", "2022-04-01"),
    "the plan in March 2023": ("in March 2023", "month", "2023-03-01", "2023-04-01"),
    "the offsite in March of last year": ("in March of last year", "month", "2022-03-01", "2022-04-01"),
    "the audit in April of this year": ("in April of this year", "month", "2023-04-01", "2023-05-01"),
    "what broke March two years ago": ("March two years ago", "month", "2021-03-01", "2021-04-01"),
    "the move last year in March": ("last year in March", "month", "2022-03-01", "2022-04-01"),
    "the call on 7 March last year": ("on 7 March last year", "day", "2022-03-07", "2022-03-08"),
    "notes from October 3 last year": ("October 3 last year", "day", "2022-10-03", "2022-10-04"),
    "what we planned last March": ("last March", "month", "2023-03-01", "2023-04-01"),
    "the review next February": ("next February", "month", "2024-02-01", "2024-03-01"),
    "the trip last summer": ("last summer", "season", "2023-06-01", "2023-09-01"),
    "photos from the summer of 2022": ("the summer of 2022", "season", "2022-06-01", "2022-09-01"),
    "the garden in the spring of last year": (
        "in the spring of last year",
        "season",
        "2022-03-01",
        "2022-06-01",
    ),
    "the hike summer two years ago": ("summer two years ago", "season", "2021-06-01", "2021-09-01"),
    "snow in winter last year": ("in winter last year", "season", "2021-12-01", "2022-03-01"),
    "where were we the spring before last": ("the spring before last", "season", "2022-03-01", "2022-06-01"),
    "the summer before last": ("the summer before last", "season", "2022-06-01", "2022-09-01"),
    "the May before last": ("the May before last", "month", "2022-05-01", "2022-06-01"),
    "what did I do the first week of April?": ("the first week of April", "week", "2023-04-01", "2023-04-08"),
    "bugs in the second week of March 2023": (
        "in the second week of March 2023",
        "week",
        "2023-03-08",
        "2023-03-15",
    ),
    "the third week of June last year": (
        "the third week of June last year",
        "week",
        "2022-06-15",
        "2022-06-22",
    ),
    "the 4th week of February": ("the 4th week of February", "week", "2023-02-22", "2023-03-01"),
    "the last week of October": ("the last week of October", "week", "2023-10-25", "2023-11-01"),
    "the first week of last month": ("the first week of last month", "week", "2023-10-01", "2023-10-08"),
    "the first weekend of April": ("the first weekend of April", "weekend", "2023-04-01", "2023-04-03"),
    "the last weekend of September": ("the last weekend of September", "weekend", "2023-09-30", "2023-10-02"),
    "what did we do the weekend before last": (
        "the weekend before last",
        "weekend",
        "2023-11-04",
        "2023-11-06",
    ),
    "the week before last": ("the week before last", "week", "2023-10-30", "2023-11-06"),
    "bills from the month before last": ("the month before last", "month", "2023-09-01", "2023-10-01"),
    "goals from the year before last": ("the year before last", "year", "2021-01-01", "2022-01-01"),
    "everything since March last year": ("since March last year", "since", "2022-03-01", None),
    "releases between March and May last year": (
        "between March and May last year",
        "span",
        "2022-03-01",
        "2022-06-01",
    ),
    "what changed before the first week of April": (
        "before the first week of April",
        "before",
        None,
        "2023-04-01",
    ),
}

# Words that only look like times.
FALSE_POSITIVES = [
    "May I ask what you think?",
    "They will march on the capital",
    "Will's car broke down",
    "I want a second opinion",
    "Sunday school was fun",
    "He wrote about the fall of Rome",
    "spring cleaning of the garage",
    "Have you seen August Rush?",
    "did you cry in August Rush",
    "I may come along",
    "mark my words",
    "We may 3D print it",
    "they kept in march order",
    "what did we do in may",  # lower-case "may" alone is the verb
    "who will look after the kids",
    "a 2023 port scan",
    "room 2020 is booked",
    "does she like spring rolls?",
    "the summer of love",
    "back in a minute",
    "a moment ago",
    "Does Sam watch Monday Night Football?",
    "the Fall Out Boy concert",
    "Jan is my coworker",
    "the Mar-a-Lago club",
    "we were told to march on",
    "the first week was hard",  # no month: not a week of one
    "the first week of school",
    "the last march of the army",
    "we met last may",  # lower-case "may" after "last" is not the month either
    "Did you see last August Rush screening?",
]


@pytest.mark.parametrize("question", list(TRUE_POSITIVES))
def test_time_expressions_become_ranges_relative_to_the_reference_time(question):
    phrase, kind, start, end = TRUE_POSITIVES[question]
    [r] = temporal.parse(question, REF)
    assert (r.text, r.kind, r.start, r.end) == (phrase, kind, d(start), d(end))
    assert question[r.span[0] : r.span[1]].strip() == phrase


@pytest.mark.parametrize("question", list(COMPOUNDS))
def test_a_compound_expression_is_one_range_for_the_whole_phrase(question):
    phrase, kind, start, end = COMPOUNDS[question]
    [r] = temporal.parse(question, REF)
    assert (r.text, r.kind, r.start, r.end) == (phrase, kind, d(start), d(end))
    assert question[r.span[0] : r.span[1]].strip() == phrase
    assert temporal.find_time_expressions(question) == [phrase]


def test_the_rest_of_a_question_leaves_out_the_whole_compound():
    q = "what did we ship in March last year?"
    assert temporal.strip_expressions(q, temporal.parse(q, REF)) == "what did we ship ?"
    q = "what did I do the first week of April?"
    assert temporal.strip_expressions(q, temporal.parse(q, REF)) == "what did I do ?"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The verb, then a time that is one: only the time is read.
        ("I will march last year's route", [("last year", "year")]),
        ("we may next year go abroad", [("next year", "year")]),
        ("spring cleaning last year", [("last year", "year")]),
        # Counted from a day, not two weeks ago: the day is read, the week not made up.
        ("the week before last Tuesday", [("last Tuesday", "day")]),
        ("the day before last Christmas", []),
    ],
)
def test_a_compound_needs_all_its_parts(text, expected):
    assert [(r.text, r.kind) for r in temporal.parse(text, REF)] == expected


def test_the_year_of_a_compound_is_counted_from_the_reference():
    # "last March" in March is a year ago; in April it is this year's.
    [r] = temporal.parse("last March", datetime(2024, 3, 20, tzinfo=UTC))
    assert r.start == d("2023-03-01")
    [r] = temporal.parse("last March", datetime(2024, 4, 2, tzinfo=UTC))
    assert r.start == d("2024-03-01")
    # A leap year's last week of February is its days 23-29.
    [r] = temporal.parse("the last week of February 2024", REF)
    assert (r.start, r.end) == (d("2024-02-23"), d("2024-03-01"))


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_words_that_only_look_like_times_are_not_read_as_one(text):
    assert temporal.parse(text, REF) == []
    assert temporal.find_time_expressions(text) == []


def test_a_month_without_a_year_is_the_most_recent_one_not_after_the_reference():
    [june] = temporal.parse("in June", datetime(2023, 6, 10, tzinfo=UTC))  # under way: this one
    assert june.start == d("2023-06-01")
    [july] = temporal.parse("in July", datetime(2023, 6, 10, tzinfo=UTC))  # not yet: last year's
    assert july.start == d("2022-07-01")
    [summer] = temporal.parse("last summer", datetime(2023, 7, 10, tzinfo=UTC))  # under way: the one before
    assert summer.start == d("2022-06-01")


def test_recently_reads_the_configured_window():
    [r] = temporal.parse("what did we discuss recently", REF, recent_days=7)
    assert (r.start, r.end) == (d("2023-11-09"), d("2023-11-16"))


def test_an_event_range_is_left_for_the_arm_to_anchor_and_anchors_on_the_event_day():
    [r] = temporal.parse("what did we try the week before the launch of the beta?", REF)
    assert r.kind == "event" and r.event == "the launch of the beta" and r.direction == "before"
    assert not r.resolved and not r.contains(REF)
    placed = r.anchored(datetime(2023, 9, 20, 16, 0, tzinfo=UTC), {"id": "x"})
    assert (placed.start, placed.end) == (d("2023-09-13"), d("2023-09-21"))
    [after] = temporal.parse("the day after the outage", REF)
    placed = after.anchored(datetime(2023, 9, 20, 16, 0, tzinfo=UTC), {"id": "x"})
    assert (placed.start, placed.end) == (d("2023-09-20"), d("2023-09-22"))
    assert placed.as_dict()["anchor"] == {"id": "x"}


def test_several_expressions_in_one_question_and_the_rest_of_it():
    q = "What did Maria do last weekend before April 10, 2023 and in June?"
    found = temporal.parse(q, REF)
    assert [r.text for r in found] == ["last weekend", "before April 10, 2023", "in June"]
    assert temporal.strip_expressions(q, found) == "What did Maria do and ?"


def test_ranges_contain_by_start_inclusive_end_exclusive():
    [r] = temporal.parse("in June 2023", REF)
    assert r.contains(d("2023-06-01")) and r.contains(d("2023-06-30T23:59:59"))
    assert not r.contains(d("2023-07-01")) and not r.contains(None)
    [open_end] = temporal.parse("since 2021", REF)
    assert open_end.contains(d("2030-01-01")) and not open_end.contains(d("2020-12-31"))


def test_the_intent_record_carries_the_ranges_and_the_llms_phrases_use_the_same_parser():
    offline = analyse_offline("What did we decide last week about the cache?", REF)
    assert offline.time_expressions == ("last week",)
    assert [r.start for r in offline.time_ranges] == [d("2023-11-06")]
    assert offline.as_dict()["time_ranges"][0]["start"] == "2023-11-06T00:00:00+00:00"
    data = {
        "primary_intent": "temporal",
        "complexity": "simple",
        "time_expressions": ["about the cache", "in June"],  # one phrase is not a time: no range from it
        "requires_reasoning": False,
    }
    question = "What did we decide in June about the cache?"
    refined = from_llm(data, analyse_offline(question, REF), question, REF)
    [r] = refined.time_ranges
    assert (r.text, r.start, question[r.span[0] : r.span[1]]) == ("in June", d("2023-06-01"), "in June")
    # The LLM names no phrase the parser reads: the offline ranges stand.
    none = from_llm({**data, "time_expressions": ["soon-ish"]}, analyse_offline(question, REF), question, REF)
    assert [x.text for x in none.time_ranges] == ["in June"]
    # The LLM lists a compound's parts as two phrases: the offline range of the whole stands.
    question = "What did we ship in March last year?"
    split = from_llm(
        {**data, "time_expressions": ["March", "last year"]}, analyse_offline(question, REF), question, REF
    )
    assert [(x.text, x.start, x.end) for x in split.time_ranges] == [
        ("in March last year", d("2022-03-01"), d("2022-04-01"))
    ]
    question = "What did we decide in June about the cache?"
    # Without a reference time only the phrases are found (the routing fallback).
    assert analyse_offline(question).time_ranges == ()
    assert analyse_offline(question).time_expressions == ("in June",)


def test_odd_input_never_gives_an_empty_or_inverted_range():
    import random

    words = (
        "in on last next this the between and from to before after since until May March June 2023 1999 "
        "31 29 February 0 999 days weeks years ago recently week month year summer winter fall of Monday "
        "Sunday day 13/45/2023 2023-02-30 00/00/0000 a few several"
    ).split()
    rng = random.Random(7)
    refs = [datetime(2024, 2, 29, tzinfo=UTC), datetime(2099, 12, 31, 23, 59, tzinfo=UTC)]
    seen = 0
    for _ in range(3000):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
        for ref in refs:
            for r in temporal.parse(text, ref):
                seen += 1
                assert r.start is None or r.end is None or r.start < r.end, (text, ref, r)
    assert seen > 1000
    assert temporal.parse("in the last 0 days", REF) == []
    [bound] = temporal.parse("0 weeks before May 3, 2023", REF)  # no empty week: the bound remains
    assert (bound.text, bound.kind) == ("before May 3, 2023", "before")
    assert temporal.parse("on 2023-02-30", REF) == []  # no such day
