"""Time expressions in a question, and the date ranges they mean: the one parser that intent
analysis (offline, and the LLM's ``time_expressions``) and the temporal retrieval arm read.

``parse(text, reference)`` finds the phrases and turns each into a ``TimeRange`` (``start``
inclusive, ``end`` exclusive, either open) relative to ``reference``, the recall's
``reference_time``. Rules, in the reference's time zone, weeks starting on Monday, seasons
meteorological and northern (spring = March-May, winter = December-February):

- days: "today", "yesterday", "tomorrow", "N days ago", ISO dates, "May 7", "7 May 2023",
  "on October 13, 2023", "on Monday" / "last Tuesday" (the most recent one);
- weeks, months, years: "this/last/next week|weekend|month|year", "earlier this month",
  "N weeks/months/years ago" (that calendar week, month, year), "in the last N days",
  "in June" (the most recent June not after the reference, unless a year is given), "June 2023",
  "in 2023", "last summer", "in the spring of 2022";
- compounds, one range for the whole phrase: a month or season with a year said relative to the
  reference ("in March last year", "March of this year", "summer two years ago", "last year in
  March", "7 March last year"), "last/this/next March", "the spring (week, weekend, month, year)
  before last", and "the first (second, third, fourth, last) week or weekend of April [2023 / last
  year]" or "of last month" (a month's days 1-7, 8-14... or its last 7; its first Saturday and
  Sunday...). They are read inside spans and bounds too ("since March last year");
- "recently" / "lately": the ``recent_days`` before the reference (``[temporal] recent_days``);
- spans and bounds: "between March and May", "from May to July 2023", "before/after/since/until
  <date>", "N weeks before <date>", "the week before <date>";
- events: "the week before <event>", "the day after <event>", "two days before <event>", where
  the event is not a date: the range is left open (``kind="event"``, ``event`` set) and the
  temporal arm anchors it on the memory that best matches the event (``anchored``).

It is deliberately narrow: words that only look like times are not read as one. "May", "March"
and "August" count only with a day, a year, or (capitalised) after a word like "in", "last",
"since"; a month or weekday followed by a capitalised word is a title or a name ("August Rush");
"Sunday school", "the fall of Rome", "spring cleaning", "a second opinion", "Will's car", "mark
my words" and "I may" are not times; a bare number is a year only after a word like "in". A
compound needs all its parts: "the first week was hard" names no month, "we may next year" and
"march last year's route" have the verb (an ambiguous month with a relative year must be
capitalised), and "the week before last Tuesday" is not the week before last.

One module past the house's ~400 lines on purpose: it is one grammar, its rules read in order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Protocol

import dateutil.parser

DEFAULT_RECENT_DAYS = 30

_MONTH_NAMES = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_ABBREV = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9}
_ABBREV |= {"oct": 10, "nov": 11, "dec": 12}
MONTHS = {name: i for i, name in enumerate(_MONTH_NAMES, start=1)} | _ABBREV
# Month names that are also common words: only with a day or a year, or capitalised after a lead.
_AMBIGUOUS = {"may", "march", "august"}
_M_FULL = "|".join(_MONTH_NAMES)
_M_ANY = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WD = "|".join(_WEEKDAYS)
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}  # first month
_SEASON = "spring|summer|autumn|fall|winter"
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a few": 3, "a couple of": 2,
    "couple of": 2, "several": 3, "few": 3,
}  # fmt: skip
_NUM = r"(?:\d{1,3}|a\s+couple\s+of|couple\s+of|a\s+few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|several|few)"
_UNIT = r"(?:day|week|month|year|weekend)s?"
_YEAR = r"(?:19|20)\d{2}"
_ORD = r"(?:st|nd|rd|th)?"

KINDS = (  # what ``TimeRange.kind`` can be
    "day",
    "week",
    "weekend",
    "month",
    "season",
    "year",
    "recent",
    "span",
    "before",
    "after",
    "since",
    "event",
)


@dataclass(frozen=True, slots=True)
class TimeRange:
    """One time expression of a question and the range it means: ``start`` inclusive, ``end``
    exclusive, ``None`` for an open side. ``kind="event"`` is relative to an event that is not a
    date (``event``, ``offset`` and ``direction`` say how); the temporal arm anchors it."""

    text: str  # the phrase as written
    kind: str
    start: datetime | None
    end: datetime | None
    span: tuple[int, int] = (0, 0)  # where the phrase is in the question
    event: str | None = None  # kind "event": the phrase naming the event
    direction: str | None = None  # kind "event": "before" or "after"
    offset: timedelta | None = None  # kind "event": how far (None: any time before/after)
    anchor: dict[str, Any] | None = None  # kind "event", once anchored: the memory it was found on

    @property
    def resolved(self) -> bool:
        return self.start is not None or self.end is not None

    def contains(self, when: datetime | None) -> bool:
        if when is None or not self.resolved:
            return False
        return (self.start is None or when >= self.start) and (self.end is None or when < self.end)

    def anchored(self, when: datetime, anchor: dict[str, Any]) -> TimeRange:
        """This event range, placed relative to ``when`` (the event memory's ``occurred_at``).
        The event's whole day counts as "at the event", so "after" starts with it."""
        day = _day(when)
        start: datetime | None
        end: datetime | None
        if self.direction == "before":
            start, end = (None if self.offset is None else day - self.offset), day + timedelta(days=1)
        else:
            start, end = day, (None if self.offset is None else day + timedelta(days=1) + self.offset)
        return replace(self, start=start, end=end, anchor=anchor)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "text": self.text,
            "kind": self.kind,
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
        }
        if self.event is not None:
            out["event"] = self.event
            out["direction"] = self.direction
        if self.anchor is not None:
            out["anchor"] = self.anchor
        return out


# --- calendar helpers -------------------------------------------------------------------------


def _day(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int, tz) -> datetime:
    while month > 12:
        year, month = year + 1, month - 12
    while month < 1:
        year, month = year - 1, month + 12
    return datetime(year, month, 1, tzinfo=tz)


def _month(year: int, month: int, tz) -> tuple[datetime, datetime]:
    return _month_start(year, month, tz), _month_start(year, month + 1, tz)


def _year(year: int, tz) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=tz), datetime(year + 1, 1, 1, tzinfo=tz)


def _season(year: int, name: str, tz) -> tuple[datetime, datetime]:
    """The season of ``year``; winter of Y runs from December Y-1 to February Y."""
    first = SEASONS[name]
    if name == "winter":
        return _month_start(year - 1, 12, tz), _month_start(year, 3, tz)
    return _month_start(year, first, tz), _month_start(year, first + 3, tz)


def _monday(dt: datetime) -> datetime:
    return _day(dt) - timedelta(days=dt.weekday())


def _number(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBERS[word]


def _month_number(word: str) -> int:
    return MONTHS[word.lower().rstrip(".")]


# --- atoms: one date-like phrase -> (start, end, kind) ----------------------------------------
# Each atom pattern has named groups; ``_atom`` turns a match into a range. Years missing from a
# month or a day mean the most recent one not after the reference.

# A year said relative to the reference ("last year", "two years ago", "the year before last"), or
# (``_YEAR_EXPR``) also written out; not "last year's": a possessive names a thing of that year.
_REL_YEAR = (
    rf"(?:(?:this|last|next|past|previous|coming)\s+year|{_NUM}\s+years?\s+ago|the\s+year\s+before\s+last)"
    r"(?![\w'’-])"
)
_YEAR_EXPR = rf"(?:{_REL_YEAR}|{_YEAR}(?![\w'’-]))"
# "the fall of Rome", "spring rolls": a season word naming a thing, not a time.
_NOT_SEASON_THING = rf"(?!\s+of\s+(?!{_YEAR}))(?!\s+(?:cleaning|collection|roll|rolls|onion|onions)\b)"
_NOT_A_NAME = r"(?!\s+(?!I\b)(?-i:[A-Z]))"  # "August Rush", "May Day": a month before a name is a title
# What cannot follow "the week before last": a time it is counted from ("the week before last
# Tuesday" is not the week two weeks ago), or a name ("the day before last Christmas").
_NOT_FROM = (
    rf"(?!\s+(?:(?:{_WD}|{_M_FULL}|{_SEASON}|week|weekend|month|year|night|time)\b|(?!I\b)(?-i:[A-Z])))"
)

# Compounds first: a regex alternation takes its first alternative that matches, so "March last
# year" must be tried before "March" alone, or it would read as two ranges.
_COMPOUND_ATOMS = [
    (
        "week_of_month",
        r"(?:the\s+)?(?P<wn>first|second|third|fourth|1st|2nd|3rd|4th|last|final)\s+(?P<wu>week|weekend)\s+(?:of|in)\s+"
        rf"(?:(?P<wm>{_M_FULL})(?:,?\s+(?:of\s+)?(?P<wy>{_YEAR_EXPR}))?|(?P<wrel>this|last|next|previous)\s+month\b)",
    ),
    (
        "before_last",
        rf"the\s+(?P<bl>{_SEASON}|{_M_FULL}|week|weekend|month|year)\s+before\s+last(?![\w'’-]){_NOT_FROM}",
    ),
    (
        "day_year_rel",
        rf"(?:the\s+)?(?P<cd>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<cm>{_M_ANY})\.?,?\s+(?P<cy>{_REL_YEAR})"
        rf"|(?P<cm2>{_M_ANY})\.?\s+(?:the\s+)?(?P<cd2>\d{{1,2}}){_ORD},?\s+(?P<cy2>{_REL_YEAR})",
    ),
    ("month_year_rel", rf"(?P<xm>{_M_FULL})\s+(?:of\s+)?(?P<xy>{_REL_YEAR})"),
    ("season_year_rel", rf"(?:the\s+)?(?P<xs>{_SEASON})\s+(?:of\s+)?(?P<xsy>{_REL_YEAR})"),
    ("month_rel", rf"(?P<rw>last|this|next|past|previous)\s+(?P<rm>{_M_FULL})\b{_NOT_A_NAME}"),
    (  # "last year in March", "two years ago in the summer"
        "year_then_month",
        rf"(?P<ty>{_REL_YEAR})\s+(?:in|during|over)\s+(?:the\s+)?(?P<tm>{_M_FULL}|{_SEASON})\b{_NOT_A_NAME}"
        rf"{_NOT_SEASON_THING}",
    ),
    ("season_rel", rf"(?P<sw>last|this|next|past|previous)\s+(?P<sr>{_SEASON})\b{_NOT_SEASON_THING}"),
]
_ATOMS = _COMPOUND_ATOMS + [
    ("iso", rf"(?P<iy>{_YEAR})-(?P<im>\d{{2}})-(?P<id>\d{{2}})(?:[T ][\d:.]+(?:Z|[+-]\d{{2}}:?\d{{2}})?)?"),
    ("slash", r"(?P<sa>\d{1,2})/(?P<sb>\d{1,2})/(?P<sy>\d{4}|\d{2})"),
    (
        "dmy",
        rf"(?:the\s+)?(?P<dd>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<dm>{_M_ANY})\.?(?:,?\s+(?P<dy>{_YEAR}))?",
    ),
    ("mdy", rf"(?P<mm>{_M_ANY})\.?\s+(?:the\s+)?(?P<md>\d{{1,2}}){_ORD}(?!\d|:)(?:,?\s+(?P<my>{_YEAR}))?"),
    ("my", rf"(?P<ym>{_M_ANY})\.?,?\s+(?:of\s+)?(?P<yy>{_YEAR})"),
    ("season_year", rf"(?:the\s+)?(?P<sn>{_SEASON})\s+(?:of\s+)?(?P<sny>{_YEAR})"),
    ("year", rf"(?P<y>{_YEAR})(?!s|\d)"),
    ("month", rf"(?P<m>{_M_FULL}){_NOT_A_NAME}"),
]
_ATOM_P = dict(_ATOMS)
_COMPOUND = "|".join(f"(?:{p})" for _, p in _COMPOUND_ATOMS)
_COMPOUND = re.sub(r"\(\?P<\w+>", "(?:", _COMPOUND)
_ATOM_NAMED = "|".join(f"(?:{p})" for _, p in _ATOMS)
_ATOM = re.sub(r"\(\?P<\w+>", "(?:", _ATOM_NAMED)  # embeddable: no group names


def _recent_date(month: int, day: int, ref: datetime) -> datetime:
    year = ref.year
    try:
        when = datetime(year, month, day, tzinfo=ref.tzinfo)
    except ValueError:  # 29 February
        when = datetime(year, month, 28, tzinfo=ref.tzinfo)
    if when > _day(ref):
        when = when.replace(year=year - 1)
    return when


def _year_of(text: str, ref: datetime) -> int | None:
    """The year a ``_YEAR_EXPR`` names, relative to the reference's."""
    t = " ".join(text.lower().split())
    if t.isdigit():
        return int(t)
    if t == "the year before last":
        return ref.year - 2
    if t.endswith("ago"):
        n = _number(t.rsplit(" ", 2)[0])
        return ref.year - n if n <= 500 else None
    return ref.year + {"this": 0, "coming": 1, "next": 1}.get(t.split()[0], -1)


def _month_rel(which: str, month: int, ref: datetime) -> int:
    """The year of "this/last/next <month>": this year's; the latest one already over (in March,
    "last March" is a year ago); the first one not begun yet."""
    if which == "this":
        return ref.year
    if which == "next":
        return ref.year if month > ref.month else ref.year + 1
    return ref.year if month < ref.month else ref.year - 1


_NTH = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2, "fourth": 3, "4th": 3}


def _week_of_month(nth: str, unit: str, start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """ "the first week of April" is its days 1-7, the second 8-14 and so on, "the last week" its
    final 7 days: counted from the month's edges, not by calendar weeks, so the week is wholly in
    the month the question names. A weekend is the month's first (or last) Saturday and Sunday."""
    if unit == "weekend":
        if nth in ("last", "final"):
            last_day = end - timedelta(days=1)
            sat = last_day - timedelta(days=(last_day.weekday() - 5) % 7)
            return sat, sat + timedelta(days=2)
        sat = start + timedelta(days=(5 - start.weekday()) % 7)
        sat += timedelta(weeks=_NTH[nth])
        return sat, sat + timedelta(days=2)
    if nth in ("last", "final"):
        return end - timedelta(days=7), end
    first = start + timedelta(weeks=_NTH[nth])
    return first, first + timedelta(days=7)


def _compound(g: dict, ref: datetime) -> tuple[datetime, datetime, str] | None:
    """The compound atoms: one range for the whole phrase."""
    tz = ref.tzinfo
    if g.get("wn"):
        if g.get("wrel"):
            shift = {"this": 0, "last": -1, "previous": -1, "next": 1}[g["wrel"].lower()]
            start, end = _month(ref.year, ref.month + shift, tz)
        else:
            month = _month_number(g["wm"])
            year = _year_of(g["wy"], ref) if g.get("wy") else None
            if year is None and g.get("wy"):
                return None
            if year is None:
                year = ref.year if month <= ref.month else ref.year - 1
            start, end = _month(year, month, tz)
        wu = g["wu"].lower()
        return (*_week_of_month(g["wn"].lower(), wu, start, end), wu)
    if g.get("bl"):
        unit = g["bl"].lower()
        if unit in SEASONS:
            last = _season_rel_range("last", unit, ref)
            return _season(last[0].year + (1 if unit == "winter" else 0) - 1, unit, tz) + ("season",)
        if unit in MONTHS:
            month = _month_number(unit)
            return (*_month(_month_rel("last", month, ref) - 1, month, tz), "month")
        if unit == "week":
            start = _monday(ref) - timedelta(weeks=2)
            return start, start + timedelta(weeks=1), "week"
        if unit == "weekend":  # the one before "last weekend" (the Saturday before this Monday)
            start = _monday(ref) - timedelta(days=9)
            return start, start + timedelta(days=2), "weekend"
        if unit == "month":
            return (*_month(ref.year, ref.month - 2, tz), "month")
        return (*_year(ref.year - 2, tz), "year")
    if g.get("cd") or g.get("cd2"):
        year = _year_of(g.get("cy") or g["cy2"], ref)
        if year is None:
            return None
        start = datetime(
            year, _month_number(g.get("cm") or g["cm2"]), int(g.get("cd") or g["cd2"]), tzinfo=tz
        )
        return start, start + timedelta(days=1), "day"
    if g.get("tm"):
        year, name = _year_of(g["ty"], ref), g["tm"].lower()
        if year is None:
            return None
        if name in SEASONS:
            return (*_season(year, name, tz), "season")
        return (*_month(year, _month_number(name), tz), "month")
    if g.get("xm"):
        year = _year_of(g["xy"], ref)
        return None if year is None else (*_month(year, _month_number(g["xm"]), tz), "month")
    if g.get("xs"):
        year = _year_of(g["xsy"], ref)
        return None if year is None else (*_season(year, g["xs"].lower(), tz), "season")
    if g.get("sr"):
        return (*_season_rel_range(g["sw"].lower(), g["sr"].lower(), ref), "season")
    if g.get("rm"):
        month = _month_number(g["rm"])
        return (*_month(_month_rel(g["rw"].lower(), month, ref), month, tz), "month")
    return None


def _atom(m: re.Match, ref: datetime) -> tuple[datetime, datetime, str] | None:
    g, tz = m.groupdict(), ref.tzinfo
    try:
        if any(g.get(k) for k in ("wn", "bl", "cd", "cd2", "xm", "xs", "rm", "sr", "tm")):
            return _compound(g, ref)
        if g.get("iy"):
            start = datetime(int(g["iy"]), int(g["im"]), int(g["id"]), tzinfo=tz)
            return start, start + timedelta(days=1), "day"
        if g.get("sa"):
            dt = dateutil.parser.parse(f"{g['sa']}/{g['sb']}/{g['sy']}")
            start = datetime(dt.year, dt.month, dt.day, tzinfo=tz)
            return start, start + timedelta(days=1), "day"
        if g.get("dd") or g.get("md"):
            day = int(g.get("dd") or g["md"])
            month = _month_number(g.get("dm") or g["mm"])
            year = g.get("dy") or g.get("my")
            start = datetime(int(year), month, day, tzinfo=tz) if year else _recent_date(month, day, ref)
            return start, start + timedelta(days=1), "day"
        if g.get("ym"):
            return (*_month(int(g["yy"]), _month_number(g["ym"]), tz), "month")
        if g.get("sn"):
            return (*_season(int(g["sny"]), g["sn"].lower(), tz), "season")
        if g.get("y"):
            return (*_year(int(g["y"]), tz), "year")
        if g.get("m"):
            month = _month_number(g["m"])
            year = ref.year if month <= ref.month else ref.year - 1
            return (*_month(year, month, tz), "month")
    except (ValueError, OverflowError):  # 31 February, 13/13/2023
        return None
    return None


def _atom_ok(m: re.Match) -> bool:
    """A bare ambiguous month ("may", "march") counts only capitalised: "in May", not "in may";
    so does one with a relative year or "last" ("we may next year", "the last march"). With a
    written year or after "week of", it can only be the month."""
    g = m.groupdict()
    for word in (g.get("m"), g.get("rm"), g.get("bl"), g.get("xm"), g.get("tm")):
        if word and word.lower() in _AMBIGUOUS and not word[:1].isupper():
            return False
    return True


# --- the rules ---------------------------------------------------------------------------------
# Each rule: a pattern and a function (match, reference, settings) -> TimeRange fields or None.
# Earlier rules win where matches overlap; within a rule, matches are taken left to right.

_LEAD = r"(?:in|on|during|of|for|around|throughout|over)"
_BOUND = r"(?P<bound>before|after|since|until|till|by|prior\s+to|as\s+of)"
_EVENT_STOP = r"(?=\s*(?:[?.!,;:]|$|\s+(?:and|but|when|while|where|so|because|if)\b))"
_EVENT = rf"(?P<event>(?:the|my|our|his|her|their|your|its|a|an|(?-i:[A-Z]))[^?.!,;:]{{0,80}}?){_EVENT_STOP}"


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern
    build: Callable[[re.Match, datetime, dict], dict | None]


def _rule(pattern: str, build, flags=re.IGNORECASE) -> _Rule:
    return _Rule(re.compile(pattern, flags), build)


class _Groups(Protocol):
    """What the span and offset rules read of their match: a ``re.Match``, or a ``_Swap`` of one."""

    def group(self, name: str, /) -> str | Any: ...

    def groupdict(self) -> dict[str, str | Any]: ...


def _from_atom(name: str) -> Callable[[_Groups, datetime], tuple[datetime, datetime, str] | None]:
    """Parse the named sub-phrase of a match as an atom."""

    def parse_sub(m: _Groups, ref: datetime) -> tuple[datetime, datetime, str] | None:
        sub = _ATOM_RE.fullmatch(m.group(name).strip())
        if sub is None or not _atom_ok(sub):
            return None
        return _atom(sub, ref)

    return parse_sub


_ATOM_RE = re.compile(_ATOM_NAMED, re.IGNORECASE)
_right = _from_atom("b")


def _span(m: _Groups, ref: datetime, _s: dict) -> dict | None:
    a_text, b_text = m.group("a").strip(), m.group("b").strip()
    b = _right(m, ref)
    if b is None:
        return None
    a_sub = _ATOM_RE.fullmatch(a_text)
    if a_sub is None or not _atom_ok(a_sub):
        return None
    a = _atom(a_sub, ref)
    if a is None:
        return None
    # "between March and May 2023": the year written on the right side applies to the left one,
    # and a span without a year is the most recent one that has ended (or is under way).
    year = re.search(_YEAR, b_text)
    if year and not re.search(_YEAR, a_text) and a_sub.groupdict().get("m"):
        a = (*_month(int(year.group(0)), _month_number(a_sub.group("m")), ref.tzinfo), "month")
    if a[0] >= b[1]:
        if a_sub.groupdict().get("m") or a_sub.groupdict().get("md") or a_sub.groupdict().get("dd"):
            a = (a[0].replace(year=a[0].year - 1), a[1].replace(year=a[1].year - 1), a[2])
        if a[0] >= b[1]:
            return None
    return {"kind": "span", "start": a[0], "end": b[1]}


def _bound(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    a = _from_atom("a")(m, ref)
    if a is None:
        return None
    bound = " ".join(m.group("bound").lower().split())
    if bound in ("before", "until", "till", "by", "prior to"):
        return {"kind": "before", "start": None, "end": a[0] if bound in ("before", "prior to") else a[1]}
    if bound in ("since", "as of"):
        return {"kind": "since", "start": a[0], "end": None}
    return {"kind": "after", "start": a[1], "end": None}


_OFFSETS = {"day": timedelta(days=1), "week": timedelta(days=7), "weekend": timedelta(days=7)}
_OFFSETS |= {"month": timedelta(days=30), "year": timedelta(days=365)}


def _offset(m: _Groups) -> timedelta:
    unit = m.group("unit").lower().rstrip("s")
    n = _number(m.group("n")) if m.groupdict().get("n") else 1
    return n * _OFFSETS[unit]


def _relative_to_date(m: _Groups, ref: datetime, _s: dict) -> dict | None:
    """ "the week before August 3, 2023", "two weeks before 11 August": the offset's width, ending
    at (or starting after) the date."""
    a = _from_atom("a")(m, ref)
    if a is None:
        return None
    off = _offset(m)
    if not off:
        return None
    if m.group("dir").lower() == "before":
        return {"kind": "span", "start": a[0] - off, "end": a[0]}
    return {"kind": "span", "start": a[1], "end": a[1] + off}


def _relative_to_event(m: _Groups, ref: datetime, _s: dict) -> dict | None:
    event = m.group("event").strip()
    if _ATOM_RE.fullmatch(event) or re.fullmatch(r"(?:the\s+)?(?:day|week|month|year)s?", event, re.I):
        return None  # a date: the date rule reads it
    return {
        "kind": "event",
        "start": None,
        "end": None,
        "event": event,
        "direction": m.group("dir").lower(),
        "offset": _offset(m),
    }


def _lead_atom(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    sub = _ATOM_RE.fullmatch(m.group("a").strip())
    if sub is None or not _atom_ok(sub):
        return None
    a = _atom(sub, ref)
    return None if a is None else {"kind": a[2], "start": a[0], "end": a[1]}


def _plain_date(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    """A full date without a lead ("May 7", "7 May 2023", "2023-05-07", "June 2023")."""
    word = m.groupdict().get("mm") or m.groupdict().get("dm")
    if (
        word
        and word.lower() in _AMBIGUOUS
        and not word[:1].isupper()
        and not (m.group("my") or m.group("dy"))
    ):
        return None  # "we may 3D print it"
    a = _atom(m, ref)
    return None if a is None else {"kind": a[2], "start": a[0], "end": a[1]}


def _weekday(wd: str, which: str | None, ref: datetime) -> dict | None:
    target = _WEEKDAYS.index(wd.lower())
    today = _day(ref)
    back = (today.weekday() - target) % 7
    which = (which or "").lower()
    if which == "last" and back == 0:
        back = 7
    if which == "next":
        start = today + timedelta(days=(target - today.weekday()) % 7 or 7)
    else:
        start = today - timedelta(days=back)
    return {"kind": "day", "start": start, "end": start + timedelta(days=1)}


def _named_day(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    shift = {"today": 0, "tonight": 0, "yesterday": -1, "tomorrow": 1}[m.group(0).lower()]
    start = _day(ref) + timedelta(days=shift)
    return {"kind": "day", "start": start, "end": start + timedelta(days=1)}


def _this_last_next(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    which, unit = m.group("which").lower(), m.group("unit").lower()
    shift = {"this": 0, "current": 0, "last": -1, "past": -1, "previous": -1, "next": 1, "coming": 1}[which]
    tz = ref.tzinfo
    if unit == "week":
        start = _monday(ref) + timedelta(weeks=shift)
        return {"kind": "week", "start": start, "end": start + timedelta(weeks=1)}
    if unit == "weekend":
        start = _monday(ref) + timedelta(days=5) + timedelta(weeks=shift)
        if shift == -1:  # "last weekend": the one before this week's Monday
            start = _monday(ref) - timedelta(days=2)
        return {"kind": "weekend", "start": start, "end": start + timedelta(days=2)}
    if unit == "month":
        start, end = _month(ref.year, ref.month + shift, tz)
        return {"kind": "month", "start": start, "end": end}
    if unit == "year":
        start, end = _year(ref.year + shift, tz)
        return {"kind": "year", "start": start, "end": end}
    return None


def _earlier_this(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    unit, tz = m.group("unit").lower(), ref.tzinfo
    start = {
        "week": _monday(ref),
        "month": _month_start(ref.year, ref.month, tz),
        "year": datetime(ref.year, 1, 1, tzinfo=tz),
    }[unit]
    return {"kind": unit, "start": start, "end": _day(ref) + timedelta(days=1)}


def _ago(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    n, unit, tz = _number(m.group("n")), m.group("unit").lower().rstrip("s"), ref.tzinfo
    if n > 500:
        return None
    if unit == "day":
        start = _day(ref) - timedelta(days=n)
        return {"kind": "day", "start": start, "end": start + timedelta(days=1)}
    if unit in ("week", "weekend"):
        start = _monday(ref) - timedelta(weeks=n)
        return {"kind": "week", "start": start, "end": start + timedelta(weeks=1)}
    if unit == "month":
        start, end = _month(ref.year, ref.month - n, tz)
        return {"kind": "month", "start": start, "end": end}
    start, end = _year(ref.year - n, tz)
    return {"kind": "year", "start": start, "end": end}


def _within(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    n = _number(m.group("n")) if m.group("n") else 1
    if n < 1:
        return None
    unit = m.group("unit").lower().rstrip("s")
    days = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}[unit] * n
    end = _day(ref) + timedelta(days=1)
    return {"kind": "recent", "start": end - timedelta(days=days), "end": end}


def _recently(m: re.Match, ref: datetime, settings: dict) -> dict | None:
    end = _day(ref) + timedelta(days=1)
    return {"kind": "recent", "start": end - timedelta(days=settings["recent_days"]), "end": end}


def _season_rel(m: re.Match, ref: datetime, _s: dict) -> dict | None:
    start, end = _season_rel_range((m.group("which") or "").lower(), m.group("sn").lower(), ref)
    return {"kind": "season", "start": start, "end": end}


def _season_rel_range(which: str, name: str, ref: datetime) -> tuple[datetime, datetime]:
    """ "last/this/next summer", "in the summer" (``which`` empty): the latest one begun, except
    that "last" is one that is over."""
    tz, today = ref.tzinfo, _day(ref)
    year = ref.year + (1 if name == "winter" and ref.month == 12 else 0)
    start, end = _season(year, name, tz)
    if start > today:  # not begun yet this year: the last one
        start, end = _season(year - 1, name, tz)
    if which in ("last", "past", "previous") and end > today:  # under way: "last" is the one before
        start, end = _season(year - 1, name, tz)
    if which == "next":
        start, end = _season(year if start > today else year + 1, name, tz)
    return start, end


class _Swap:
    """A match whose alternative groups (``a2``, ``unit2``, ``wd2``) read as their main name."""

    def __init__(self, m: re.Match[str]) -> None:
        self._m = m

    def group(self, name: str, /) -> str | Any:
        value = self._m.group(name)
        if value is None and isinstance(name, str) and name in self._m.re.groupindex:
            alt = name + "2"
            if alt in self._m.re.groupindex:
                return self._m.group(alt)
        return value

    def groupdict(self) -> dict[str, str | Any]:
        d = self._m.groupdict()
        for k in list(d):
            if d[k] is None and (k + "2") in d:
                d[k] = d[k + "2"]
        return d


def _weekday_rule(m: re.Match, ref: datetime, s: dict) -> dict | None:
    wd = m.group("wd") or m.group("wd2")
    # "on Monday Night Football": a name
    after = m.string[m.end() : m.end() + 3]
    if re.match(r"\s[A-Z]", after) and not re.match(r"\sI\b", m.string[m.end() : m.end() + 3]):
        return None
    return _weekday(wd, m.group("which"), ref)


_RULES: list[_Rule] = [
    # spans: "between March and May", "from 3 May to 10 May 2023"
    _rule(
        rf"\b(?:between\s+(?P<a>(?:{_ATOM}))\s+and|from\s+(?P<a2>(?:{_ATOM}))\s+(?:to|until|till|through))"
        rf"\s+(?P<b>(?:{_ATOM}))",
        lambda m, ref, s: _span(_Swap(m), ref, s),
    ),
    # "the week before August 3, 2023", "two weeks before 11 August"
    _rule(
        rf"\b(?:(?:the|a)\s+(?P<unit>day|week|weekend|month|year)|(?P<n>{_NUM})\s+(?P<unit2>{_UNIT}))"
        rf"\s+(?P<dir>before|after)\s+(?P<a>(?:{_ATOM}))(?![\w-])",
        lambda m, ref, s: _relative_to_date(_Swap(m), ref, s),
    ),
    # "the day after the launch", "two weeks before our trip to Rome": anchored on a memory later
    _rule(
        rf"\b(?:(?:the|a)\s+(?P<unit>day|week|weekend|month|year)|(?P<n>{_NUM})\s+(?P<unit2>{_UNIT}))"
        rf"\s+(?P<dir>before|after)\s+{_EVENT}",
        lambda m, ref, s: _relative_to_event(_Swap(m), ref, s),
    ),
    # "before June 2023", "since 2021", "after May 7"
    _rule(rf"\b{_BOUND}\s+(?P<a>(?:{_ATOM}))(?![\w-])", _bound),
    # Compounds, one range for the whole phrase: "in March last year", "the first week of April",
    # "the weekend before last", "last March". After the spans and bounds above (they contain
    # compounds: "since March last year"), before the rules below that would read a part of one.
    _rule(rf"\b(?:{_LEAD}\s+)?(?P<a>{_COMPOUND})(?![\w-])", _lead_atom),
    # "in the summer of 2022", "summer 2023"
    _rule(rf"\b(?:{_LEAD}\s+)?(?P<a>(?:the\s+)?(?:{_SEASON})\s+(?:of\s+)?{_YEAR})\b", _lead_atom),
    # "last summer", "this spring", "in the fall" (not "the fall of Rome", "spring cleaning")
    _rule(
        rf"\b(?:(?P<which>last|this|next|past|previous)\s+|(?:in|during|over|through)\s+(?:the\s+)?)"
        rf"(?P<sn>{_SEASON})\b{_NOT_SEASON_THING}",
        _season_rel,
    ),
    # full dates, with or without a lead: "on October 13, 2023", "7 May 2023", "May 7", ISO
    _rule(
        rf"\b(?:(?:on|in|of|for|around)\s+)?(?:{_ATOM_P['iso']}|{_ATOM_P['slash']}|{_ATOM_P['dmy']}"
        rf"|{_ATOM_P['mdy']}|{_ATOM_P['my']})(?![\w-])",
        _plain_date,
    ),
    # "in June", "in 2023", "during March" (a bare month or year needs the lead)
    _rule(rf"\b{_LEAD}\s+(?P<a>(?:{_ATOM_P['year']}|{_ATOM_P['month']}))(?![\w-])", _lead_atom),
    _rule(
        rf"\b(?P<which>last|this|next)\s+(?P<wd>{_WD})\b|\bon\s+(?P<wd2>{_WD})\b(?!\s+school)", _weekday_rule
    ),
    _rule(r"\b(?:today|tonight|yesterday|tomorrow)\b", _named_day),
    _rule(
        r"\b(?:earlier|so\s+far)\s+this\s+(?P<unit>week|month|year)\b",
        _earlier_this,
    ),
    _rule(
        r"\b(?P<which>this|last|next|past|previous|coming|current)\s+(?P<unit>week|weekend|month|year)\b",
        _this_last_next,
    ),
    _rule(rf"\b(?P<n>{_NUM})\s+(?P<unit>{_UNIT})\s+ago\b", _ago),
    _rule(
        rf"\b(?:in|over|during|within|for)\s+the\s+(?:last|past|previous)\s+(?P<n>{_NUM})?\s*(?P<unit>{_UNIT})\b",
        _within,
    ),
    _rule(r"\b(?:recently|lately|of\s+late|these\s+days|nowadays|the\s+other\s+day)\b", _recently),
]


def parse(text: str, reference: datetime, *, recent_days: int = DEFAULT_RECENT_DAYS) -> list[TimeRange]:
    """Every time expression in ``text`` with its range relative to ``reference``, in order of
    appearance, without overlaps (earlier rules win)."""
    settings = {"recent_days": recent_days}
    taken: list[tuple[int, int]] = []
    found: list[TimeRange] = []
    for rule in _RULES:
        for m in rule.pattern.finditer(text):
            a, b = m.span()
            if any(a < y and x < b for x, y in taken):
                continue
            fields = rule.build(m, reference, settings)
            if fields is None:
                continue
            taken.append((a, b))
            found.append(TimeRange(text=m.group(0).strip(), span=(a, b), **fields))
    return sorted(found, key=lambda r: r.span)


def find_time_expressions(text: str) -> list[str]:
    """The time phrases in ``text``, as written, in order, without overlaps."""
    return [r.text for r in parse(text, _PHRASES_ONLY)]


_PHRASES_ONLY = datetime(2000, 6, 15)  # any reference: only the phrases are used


def strip_expressions(text: str, ranges: list[TimeRange] | tuple[TimeRange, ...]) -> str:
    """``text`` without the phrases of ``ranges`` (their spans), for scoring the rest of it."""
    out, last = [], 0
    for r in sorted(ranges, key=lambda r: r.span):
        a, b = r.span
        if a < last or b <= a:
            continue
        out.append(text[last:a])
        last = b
    out.append(text[last:])
    return " ".join("".join(out).split())
