"""Supersession, offline: whether a new memory states a newer value of the same attribute of the
same subject as a stored one ("Maya lives in Lisbon", later "Maya moved to Berlin"), so that the
older one is marked ``superseded_by`` the newer (nothing is deleted), or contradicts one it cannot
be ordered against (a ``conflict``: both kept).

Decided only among the new memory's nearest neighbours in its project (``write.py`` hands them in),
and only between two texts that share their subject: the earliest name or pronoun that a text is
about ("Maya", "I", "we"; "my sister Maya" is Maya). Then:

- **the attribute**: both name the same kind of fact (a family of words below: where someone
  lives, works, what a team deploys to, a price, a schedule, ...), or share a rarer content word
  that is neither's value ("standup", "frontend");
- **a different value**: each has content words the other lacks (a restatement is not a change);
- **an order**: the newer by valid time (``occurred_at``, else when it was stored) supersedes the
  older, never the other way, whatever the order they were stored in;
- **a reason to believe it replaces**: the newer says so ("now", "moved", "switched", "no
  longer", ...), or the attribute holds one value at a time (a home, an employer; not pets or
  hobbies). Additive news ("also", "another", "a second") supersedes nothing.

Two that meet all but the order (the same time, no change said) or where one denies what the
other states ("never" against "did") are a conflict.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from memlane.pipeline import entities
from memlane.pipeline.words import STOPWORDS, same_word, token_rank

# Neighbours of a new memory that the detector reads: a replaced fact is worded like its successor,
# so it is among the closest few.
CANDIDATES = 8
# Below this cosine similarity two texts are about different things whatever their words share;
# a newer one that does not say it changes anything must be closer still (chat turns about one's
# work share a subject and an attribute without one replacing the other).
MIN_SIMILARITY = 0.25
UNSAID_SIMILARITY = 0.65
# A statement of one fact is short, and a newer value changes a slot of it: two texts with more
# content words, or that differ in more, are a conversation's turns that share a topic (on LoCoMo's
# development turns, without these bounds, one turn in four "superseded" another).
MAX_WORDS = 12
MAX_CHANGED = 4

_TOKEN = re.compile(r"[A-Za-z0-9$€£][\w'’$€£.:-]*[\w$€£]|[A-Za-z0-9]")
_FIRST = frozenset("i i'm i've i'd i'll me my mine myself".split())
_WE = frozenset("we we're we've we'd we'll our ours us ourselves".split())
_POSSESSIVE = frozenset({"my", "our"})
# Capitalised openers that are not what a text is about.
_NOT_NAMES = frozenset(
    """yesterday today tomorrow tonight last next recently lately also then well yes no ok okay so
    now currently still since sometimes usually always never please thanks just actually""".split()
)

# Kinds of facts, by the words that name them (prefixes: "relocat" is relocated, relocating). The
# flag says whether the attribute holds one value at a time: a newer statement of one replaces
# the older without saying so.
_FAMILY_WORDS: tuple[tuple[bool, str], ...] = (
    (
        True,
        "live lives living lived moved move moving relocat based reside home apartment flat house hometown city",
    ),
    (
        True,
        "work works working worked job employ joined hired company position role career startup quit title promot",
    ),
    (True, "deploy host hosting hosted server cloud infra cluster"),
    (True, "database db datastore storage cache"),
    (True, "version upgrad downgrad release runtime python node"),
    (
        True,
        "meet meeting standup stand-up sync schedul reschedul call class lesson practice shift appointment deadline due",
    ),
    (True, "price cost costs plan subscription pay pays paid fee rent salary budget charge"),
    (
        True,
        "own owns owned owner maintain lead leads led manag responsible charge took handles assigned on-call oncall",
    ),
    (True, "diet vegan vegetarian pescatarian keto eat eats eating meat"),
    (True, "phone number email address contact"),
    (True, "married dating partner girlfriend boyfriend wife husband engaged single divorc"),
    (True, "study studies studying school university college major degree"),
    (True, "drive drives car"),
    (True, "editor ide terminal shell browser laptop os"),
    (True, "framework library frontend backend orm bundler linter formatter stack language"),
    (False, "pet pets dog dogs cat cats puppy kitten"),
    (False, "hobby hobbies play plays playing sport learn learning"),
    (False, "friend friends kid kids child children son daughter"),
)
_FAMILIES = tuple((single, tuple(words.split())) for single, words in _FAMILY_WORDS)
_OWNER = next(i for i, (_, stems) in enumerate(_FAMILIES) if "owner" in stems)
# Words that say a value changed. Phrases are matched on the lower-cased text.
_CHANGE_WORDS = frozenset(
    """now moved switched switch switching replaced replace instead changed change upgraded
    upgrading downgraded migrated migrating relocated rescheduled ditched dropped new newer
    currently anymore nowadays became become becomes promoted renamed took left quit""".split()
)
_CHANGE_PHRASES = ("no longer", "any more", "these days", "took over", "from now on", "not anymore")
_ADDITIVE_WORDS = frozenset("also another second third too additionally added adding both extra".split())
_ADDITIVE_PHRASES = ("as well", "in addition", "one more", "on top of")
_NEGATIONS = frozenset(
    "never not no don't doesn't didn't isn't aren't wasn't won't can't haven't hasn't".split()
)
# A word this frequent (its cl100k id below this) is no attribute of its own ("went", "got").
_RARE_RANK = 3000


@dataclass(frozen=True, slots=True)
class Text:
    """What the detector reads of one memory."""

    id: UUID
    content: str
    valid_from: datetime  # occurred_at, else when it was stored


@dataclass(frozen=True, slots=True)
class Verdict:
    old: UUID  # superseded (or, for a conflict, the stored memory)
    new: UUID  # its successor (or, for a conflict, the new memory)
    kind: str  # "replaces" or "conflicts"


@dataclass(frozen=True, slots=True)
class _Read:
    subject: str | None
    words: frozenset[str]  # lower-cased content words
    families: frozenset[int]
    single: bool  # some family it names holds one value at a time
    change: bool
    additive: bool
    negated: bool
    capitalised: frozenset[str]  # words written with a capital: names, no attribute of their own
    asks: bool  # a question states no value


def _tokens(text: str) -> list[str]:
    return [t.lower().rstrip(".:") for t in _TOKEN.findall(text)]


def _in_family(word: str, stems: tuple[str, ...]) -> bool:
    return any(word == s or (len(s) >= 5 and word.startswith(s)) for s in stems)


def subject(text: str) -> str | None:
    """The key of what ``text`` is about: its earliest name (an entity), or "i" / "we" for a first
    person; "my sister Maya" is Maya. None when it names neither."""
    named = [
        (text.find(e.name), e.key)
        for e in entities.extract(text, limit=6)
        if e.kind in ("name", "term", "handle") and text.find(e.name) >= 0
    ]
    pronoun: tuple[int, str, str] | None = None
    for m in re.finditer(r"[A-Za-z'’]+", text):
        w = m.group(0).lower().replace("’", "'")
        if w in _FIRST or w in _WE:
            pronoun = (m.start(), "i" if w in _FIRST else "we", w)
            break
    first_name = min(named) if named else None
    if first_name is None or first_name[0] > 0:
        # A name that opens the text is a name even when it is a common word too ("Tom", "Grace").
        opener = re.match(r"([A-Z][a-z]+)(?:['’]s)?\b", text)
        if opener and opener.group(1).lower() not in STOPWORDS and opener.group(1).lower() not in _NOT_NAMES:
            first_name = (0, opener.group(1).lower())
    if pronoun is None:
        if first_name is not None:
            return first_name[1]
        # "The standup is at 9am": the first content word is what it is about.
        for t in _tokens(text):
            if t not in STOPWORDS and not t[0].isdigit():
                return t
        return None
    if first_name is None or pronoun[0] < first_name[0]:
        # "my sister Maya", "our new manager, Priya": the name is the subject.
        if pronoun[2] in _POSSESSIVE and first_name is not None and first_name[0] - pronoun[0] <= 25:
            return first_name[1]
        return pronoun[1]
    return first_name[1]


@functools.lru_cache(maxsize=4096)
def _read(content: str) -> _Read:
    toks = _tokens(content)
    low = " " + " ".join(toks) + " "
    negated = bool(_NEGATIONS.intersection(t.replace("’", "'") for t in toks))
    # "Bye for now" changes nothing; "I won't quit" says nothing changed.
    cues = set(toks) - ({"now"} if " for now " in low else set())
    fams = frozenset(i for i, (_, stems) in enumerate(_FAMILIES) for w in toks if _in_family(w, stems))
    words = frozenset(
        t for t in toks if t not in STOPWORDS and t not in _FIRST and t not in _WE and len(t) > 1
    )
    return _Read(
        subject=subject(content),
        words=words,
        families=fams,
        single=any(_FAMILIES[i][0] for i in fams),
        change=(bool(_CHANGE_WORDS & cues) and not negated) or any(f" {p} " in low for p in _CHANGE_PHRASES),
        additive=bool(_ADDITIVE_WORDS.intersection(toks)) or any(f" {p} " in low for p in _ADDITIVE_PHRASES),
        negated=negated,
        capitalised=frozenset(t.lower() for t in _TOKEN.findall(content) if t[:1].isupper()),
        asks="?" in content,
    )


def _only_in(a: frozenset[str], b: frozenset[str]) -> set[str]:
    """Words of ``a`` that no word of ``b`` matches (plurals and shared stems count as one)."""
    return {w for w in a if not any(same_word(w, x) for x in b)}


def _plain(words: set[str]) -> set[str]:
    """Value words: neither a change or additive cue nor a negation."""
    return {w for w in words if w not in _CHANGE_WORDS and w not in _ADDITIVE_WORDS and w not in _NEGATIONS}


def _same_attribute(a: _Read, b: _Read) -> bool:
    if a.families & b.families:
        return True
    shared = {w for w in a.words if any(same_word(w, x) for x in b.words)} - {a.subject, b.subject}
    shared -= a.capitalised | b.capitalised
    return any(token_rank(w) >= _RARE_RANK and not w.isdigit() for w in _plain(shared))


def _same_thing_new_owner(rn: _Read, ro: _Read) -> bool:
    """ "Priya took over the billing service" after "Dana owns the billing service": the subjects
    differ, the thing owned is the same, and the newer says it changed hands."""
    if not (rn.families & ro.families & {_OWNER}) or not (rn.change or ro.change):
        return False
    shared = {w for w in rn.words if any(same_word(w, x) for x in ro.words)} - {rn.subject, ro.subject}
    return any(token_rank(w) >= _RARE_RANK for w in _plain(shared) if not _in_family(w, _FAMILIES[_OWNER][1]))


def judge(new: Text, old: Text, similarity: float) -> Verdict | None:
    """What ``new`` (just stored) does to ``old`` (stored before, current), or None."""
    if similarity < MIN_SIMILARITY or new.id == old.id:
        return None
    rn, ro = _read(new.content), _read(old.content)
    if len(rn.words) > MAX_WORDS or len(ro.words) > MAX_WORDS or rn.asks or ro.asks:
        return None
    if rn.subject is None or not _same_attribute(rn, ro):
        return None
    if rn.subject != ro.subject and not _same_thing_new_owner(rn, ro):
        return None
    newer, older, rnewer = (new, old, rn) if new.valid_from >= old.valid_from else (old, new, ro)
    # Who owns it is the value when the thing owned is the subject.
    subjects = {rn.subject, ro.subject} if rn.subject == ro.subject else set()
    only_new = _plain(_only_in(rn.words, ro.words)) - subjects
    only_old = _plain(_only_in(ro.words, rn.words)) - subjects
    if rn.negated != ro.negated and not rnewer.change:
        # One denies what the other states ("I never went to Japan" / "I went to Japan").
        if len(only_new) + len(only_old) <= 2:
            return Verdict(old=old.id, new=new.id, kind="conflicts")
        return None
    if len(only_new) > MAX_CHANGED or len(only_old) > MAX_CHANGED:
        return None
    if not only_new or not only_old or rnewer.additive:
        return None  # a restatement, or news that adds to what was known
    if new.valid_from == old.valid_from and not rnewer.change:
        # Nothing orders them: both kept, marked, for the client to ask which is right.
        return Verdict(old=old.id, new=new.id, kind="conflicts") if rn.single and ro.single else None
    unsaid = rnewer.single and bool(rn.families & ro.families) and not (rn.negated or ro.negated)
    if rnewer.change or (unsaid and similarity >= UNSAID_SIMILARITY):
        return Verdict(old=older.id, new=newer.id, kind="replaces")
    return None


def decide(new: Text, neighbours: Sequence[tuple[Text, float]]) -> list[Verdict]:
    """Every verdict about ``new`` among its current ``neighbours`` (text, cosine similarity),
    nearest first. A memory dated earlier than a neighbour can be superseded by it, never
    supersede it."""
    out: list[Verdict] = []
    for old, sim in neighbours:
        v = judge(new, old, sim)
        if v is not None:
            out.append(v)
    # The new memory is replaced by at most one (the newest that replaces it).
    replaced_by = [v for v in out if v.kind == "replaces" and v.old == new.id]
    if len(replaced_by) > 1:
        keep = max(replaced_by, key=lambda v: next(t.valid_from for t, _ in neighbours if t.id == v.new))
        out = [v for v in out if not (v.kind == "replaces" and v.old == new.id) or v is keep]
    return out
