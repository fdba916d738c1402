"""Supersession, offline: whether a new memory states a newer value of the same attribute of the
same subject as a stored one ("Maya lives in Lisbon", later "Maya moved to Berlin"), so that the
older one is marked ``superseded_by`` the newer (nothing is deleted), or contradicts one it cannot
be ordered against (a ``conflict``: both kept).

Decided only among the new memory's nearest neighbours in its project (``marks.py`` hands them in),
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
  hobbies). Additive news ("also", "another", "a second") supersedes nothing;
- **all of it**: the newer says something about every statement of the older (``statements``,
  ``covers``). "Tidepool switched its cache to sled" replaces a part of "Tidepool uses Redis for
  its cache and targets v0.3 in March": that memory stays current, its v0.3 still answers, and
  recall puts the newer first for the question about the cache (``same_fact``,
  ``answers_as_well``). A memory is not split into statements when stored: it is what the user
  said, with one id, one history and one undo.

Recall reads statements with the same rules, looser (``same_fact``, ``whose``): a wrong guess
there only reorders an answer, where a wrong mark here would hide one.

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
# Two statements this close with one subject are one fact's two values, whatever words name it.
RESTATED_SIMILARITY = 0.8
# A statement of one fact is short, and a newer value changes a slot of it: two texts with more
# content words, or that differ in more, are a conversation's turns that share a topic (on LoCoMo's
# development turns, without these bounds, one turn in four "superseded" another).
MAX_WORDS = 12
MAX_CHANGED = 6

_SPEAKER = re.compile(r"([A-Z][\w.'’-]*(?: [A-Z][\w.'’-]*)?):\s+")
_SENTENCE_START = re.compile(r"(?:^|[.!?;:]\s*)$")
_TOKEN = re.compile(r"[A-Za-z0-9$€£][\w'’$€£.:-]*[\w$€£]|[A-Za-z0-9]")
_FIRST = frozenset("i i'm i've i'd i'll me my mine myself".split())
_WE = frozenset("we we're we've we'd we'll our ours us ourselves".split())
_POSSESSIVE = frozenset({"my", "our"})
# People named by their relation to someone: "my partner", "Kenji's parents" are not "I", "Kenji".
_RELATIONS = frozenset(
    """partner wife husband girlfriend boyfriend mum mom mother dad father parents brother sister
    son daughter kids children friend boss manager colleague roommate flatmate neighbour neighbor
    team cousin uncle aunt grandma grandpa grandmother grandfather family""".split()
)
# Capitalised openers that are not what a text is about.
_NOT_NAMES = frozenset(
    """yesterday today tomorrow tonight last next recently lately also then well yes no ok okay so
    now currently still since sometimes usually always never please thanks just actually wow
    thank sure yeah yep hey hi hello bye cheers great cool awesome oh haha lol congrats nice sounds
    see glad good sorry correction update""".split()
)

# Kinds of facts, by the words that name them (prefixes: "relocat" is relocated, relocating). The
# flag says whether the attribute holds one value at a time: a newer statement of one replaces
# the older without saying so.
_FAMILY_WORDS: tuple[tuple[bool, str], ...] = (
    (
        True,
        "live lives living lived moved move moving relocat based reside home place apartment flat house hometown city",
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
        "owns owned owner maintain lead leads led manag responsible charge took handles assigned on-call oncall",
    ),
    (True, "diet vegan vegetarian pescatarian keto eat eats eating meat"),
    (True, "phone number email address contact"),
    (True, "married dating partner girlfriend boyfriend wife husband engaged single divorc"),
    (True, "study studies studying school university college major degree graduat phd"),
    (True, "drive drives car"),
    (True, "editor ide"),
    (True, "terminal shell"),
    (True, "browser"),
    (True, "laptop computer os"),
    (True, "framework library frontend backend orm bundler linter formatter stack language"),
    (False, "pet pets dog dogs cat cats puppy kitten"),
    (False, "hobby hobbies play plays playing sport learn learning"),
    (False, "friend friends kid kids child children son daughter"),
)
_FAMILIES = tuple((single, tuple(words.split())) for single, words in _FAMILY_WORDS)
_OWNER = next(i for i, (_, stems) in enumerate(_FAMILIES) if "owner" in stems)
_COPULAS = frozenset("is are was were be been being get gets got getting".split())
# Words that say a value changed. Phrases are matched on the lower-cased text.
_CHANGE_WORDS = frozenset(
    """now moved switched switch switching replaced replace instead changed change upgraded
    upgrading downgraded migrated migrating relocated rescheduled ditched dropped new newer
    currently anymore nowadays became become becomes promoted renamed took left quit started finally
    rewrote rewritten raised handed sold graduated retrained correction actually""".split()
)
_CHANGE_PHRASES = ("no longer", "any more", "these days", "took over", "from now on", "not anymore")
_ADDITIVE_WORDS = frozenset("also another second third too additionally added adding both extra".split())
_ADDITIVE_PHRASES = ("as well", "in addition", "one more", "on top of")
_NEGATIONS = frozenset(
    "never not no don't doesn't didn't isn't aren't wasn't won't can't haven't hasn't".split()
)
# Verbs that only tie a subject to its value ("what does Tidepool use for its cache?", "Tidepool uses
# Redis"): a newer statement says "switched to" or "moved to" instead, and answers as well.
_LINKING = frozenset("use uses using run runs keep keeps".split())
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
    capitalised: frozenset[str]  # words written with a capital inside a sentence: names
    named: bool  # the subject is a name ("Maya", "Acme"), written with a capital
    asks: bool  # a question states no value
    # It reports what happened ("the team reviewed ticket 24"), not a value that holds: a newer
    # report of the same kind is another event, unless it says something changed.
    event: bool


def _tokens(text: str) -> list[str]:
    """Lower-cased words, a possessive's "'s" dropped ("Acme's" is "acme")."""
    return [re.sub(r"['’]s$", "", t.lower().rstrip(".:")) for t in _TOKEN.findall(text)]


def _in_family(word: str, stems: tuple[str, ...]) -> bool:
    return any(word == s or (len(s) >= 5 and word.startswith(s)) for s in stems)


@functools.lru_cache(maxsize=4096)
def _extracted(text: str) -> tuple[entities.Entity, ...]:
    """The names and terms of ``text``: ``subject`` and ``_named`` read them of one text (~1 ms)."""
    return tuple(entities.extract(text, limit=6))


def subject(text: str) -> str | None:
    """The key of what ``text`` is about: the earliest of its first name (an entity), a first
    person ("i", "we") and its first content word ("the standup" is "standup"). A name or a
    relation after "my" / "our" is the subject ("my sister Maya" is "maya", "my partner" is
    "my partner"), and so is a relation after a name ("Kenji's parents"). None for no words."""
    text = _without_setting(text)
    words = [
        (m.start(), m.group(0).lower().replace("’", "'"))
        for m in re.finditer(r"[A-Za-z0-9][\w'’.-]*[A-Za-z0-9]|[A-Za-z0-9]", text)
    ]
    named = [
        (text.find(e.name), e.key)
        for e in _extracted(text)
        if e.kind in ("name", "term", "handle") and text.find(e.name) >= 0
    ]
    first_name = min(named) if named else None
    if words and (first_name is None or first_name[0] > 0):
        # A name that opens the text is a name even when it is a common word too ("Tom", "Grace").
        opener = re.match(r"([A-Z][a-z]+)(?:['’]s)?\b", text)
        if opener and opener.group(1).lower() not in STOPWORDS and opener.group(1).lower() not in _NOT_NAMES:
            first_name = (0, opener.group(1).lower())
    for k, (pos, w) in enumerate(words):
        after = words[k + 1][1] if k + 1 < len(words) else ""
        if w in _POSSESSIVE:
            if after in _RELATIONS:
                nxt = words[k + 2] if k + 2 < len(words) else None
                if first_name is not None and nxt is not None and nxt[0] == first_name[0]:
                    return first_name[1]  # "my sister Maya"
                return f"{w} {after}"
            if first_name is not None and k + 1 < len(words) and words[k + 1][0] == first_name[0]:
                return first_name[1]  # "our iOS app"
            return "i" if w in _FIRST else "we"
        if w in _FIRST or w in _WE:
            return "i" if w in _FIRST else "we"
        if first_name is not None and pos >= first_name[0]:
            owner = first_name[1]
            rest = text[first_name[0] :].split(None, 3)
            # "Kenji's parents": another person than Kenji; "Priya's husband Arjun" is Arjun.
            if rest and re.search(r"['’]s?$", rest[0]) and len(rest) > 1 and rest[1].lower() in _RELATIONS:
                relative = re.match(r"[A-Z][a-z]+\b", rest[2]) if len(rest) > 2 else None
                if relative is not None and rest[2].lower() not in STOPWORDS:
                    return relative.group(0).lower()
                return f"{owner}'s {rest[1].lower()}"
            return owner
        if w not in STOPWORDS and not w[0].isdigit() and w not in _NOT_NAMES:
            return w
    return first_name[1] if first_name is not None else None


@functools.lru_cache(maxsize=4096)
def _read(content: str) -> _Read:
    # A chat turn's speaker ("Maria: ..."): her "I" is not another speaker's, and her name is no
    # word of what she says.
    speaker = _SPEAKER.match(content)
    if speaker and speaker.group(1).lower() in _NOT_NAMES:
        speaker = None  # "Correction: ...", "Update: ..." are no one's words
    if speaker:
        content = content[speaker.end() :]
    toks = _tokens(content)
    low = " " + " ".join(toks) + " "
    negated = bool(_NEGATIONS.intersection(t.replace("’", "'") for t in toks))
    # "Bye for now" changes nothing; "I won't quit" says nothing changed.
    cues = set(toks) - ({"now"} if " for now " in low else set())
    said = subject(content)
    # A person named by a relation names no attribute: "my partner" is who, not "married". (A
    # thing's name may: "the frontend is Svelte now".)
    named = _relation_words(said)
    fams = frozenset(
        i
        for i, (_, stems) in enumerate(_FAMILIES)
        for k, w in enumerate(toks)
        if w not in named and _in_family(w, stems) and not _moves_a_thing(toks, k)
    )
    words = frozenset(
        t for t in toks if t not in STOPWORDS and t not in _FIRST and t not in _WE and len(t) > 1
    )
    if speaker and said in ("i", "we"):
        said = f"{said}@{speaker.group(1).lower()}"
    return _Read(
        subject=said,
        words=words,
        families=fams,
        single=any(_FAMILIES[i][0] for i in fams),
        change=(bool(_CHANGE_WORDS & cues) and not negated) or any(f" {p} " in low for p in _CHANGE_PHRASES),
        additive=bool(_ADDITIVE_WORDS.intersection(toks)) or any(f" {p} " in low for p in _ADDITIVE_PHRASES),
        negated=negated,
        capitalised=frozenset(
            m.group(0).lower()
            for m in _TOKEN.finditer(content)
            if m.group(0)[:1].isupper() and not _SENTENCE_START.search(content[: m.start()])
        ),
        named=_named(said, content),
        asks="?" in content,
        event=_reports_event(toks, fams),
    )


# A sentence that opens with when or after what ("From September, ...", "After the second reorg
# my manager ...") says its subject after that setting.
_SETTING = re.compile(
    r"^(?:from|after|since|starting|as of|in|on|by|until|before|following)\b[^,;:]*?"
    r"(?:,\s*|\s+(?=(?:my|our|I|we)\b))",
    re.I,
)


def _without_setting(text: str) -> str:
    """``text`` without an opening setting phrase of at most 5 words, or as it is."""
    m = _SETTING.match(text)
    if m is None or len(m.group(0).split()) > 6:
        return text
    return text[m.end() :]


def _named(said: str | None, content: str) -> bool:
    """Whether the subject is a name: written with a capital inside a sentence, found as a name,
    or capitalised and no word of its own ("Priya"; a sentence's "Support" or "New" is a word)."""
    if not said or said in ("i", "we") or " " in said:
        return False
    if (
        len(said) > 4
        and said.endswith(("ed", "ing"))
        and content[:1].isupper()
        and content.lower().startswith(said)
    ):
        return False  # "Interviewed two candidates": a verb opens a note that has no subject
    if re.search(rf"(?<![.!?]\s)(?<!^)\b{re.escape(said.capitalize())}\b", content):
        return True
    if any(e.kind == "name" and e.key == said for e in _extracted(content)):
        return True
    return token_rank(said) == 1 << 30 and re.match(rf"{re.escape(said.capitalize())}\b", content) is not None


_MOVE = frozenset("move moved moving moves".split())
_WHERE_TO = frozenset("to into from in back out abroad away house home here there".split())


def _moves_a_thing(toks: list[str], k: int) -> bool:
    """ "moved" that names no home: "we moved the pipelines off Travis", not "Maya moved to Porto"
    (a move is somewhere when a place word follows it)."""
    return toks[k] in _MOVE and (k + 1 >= len(toks) or toks[k + 1] not in _WHERE_TO)


def _reports_event(toks: list[str], families: frozenset[int]) -> bool:
    """A verb in the past tense ("reviewed", "visited") that is neither a change, an attribute's
    word, nor a passive ("is hosted")."""
    for k, t in enumerate(toks):
        if len(t) > 4 and t.endswith("ed") and t.isalpha() and t not in _CHANGE_WORDS:
            if any(_in_family(t, _FAMILIES[i][1]) for i in range(len(_FAMILIES))):
                continue
            if k > 0 and toks[k - 1] in _COPULAS:
                continue
            return True
    return False


def _values(words: set[str], read: _Read) -> bool:
    """Whether these words hold a value a fact is stated with: a number or a name."""
    return any(any(c.isdigit() for c in w) or w in read.capitalised for w in words)


def _only_in(a: frozenset[str], b: frozenset[str]) -> set[str]:
    """Words of ``a`` that no word of ``b`` matches (plurals and shared stems count as one)."""
    return {w for w in a if not any(same_word(w, x) for x in b)}


def _plain(words: set[str]) -> set[str]:
    """Value words: neither a change or additive cue nor a negation."""
    return {w for w in words if w not in _CHANGE_WORDS and w not in _ADDITIVE_WORDS and w not in _NEGATIONS}


# Where one statement of a memory ends and the next begins: a sentence's end, a semicolon, a comma,
# a conjunction between clauses ("Tidepool uses Redis for its cache and targets v0.3 in March"). A
# piece of fewer than two content words is part of the statement beside it ("in Lisbon and Porto",
# "From May, ..."), not a statement of its own; so is one that opens with a preposition ("I live in
# Porto, since May": when, where or with whom, of the statement before).
_STATEMENT_BREAK = re.compile(r"(?<=[.!?])\s+|\s*;\s*|,\s+|\s+(?:and|but|while|whereas|plus)\s+", re.I)
_STATEMENT_WORDS = 2
_MODIFIER = re.compile(
    r"(?:from|after|since|starting|as|in|on|at|by|until|till|before|following|during|for|with|"
    r"without|to|every|each|except|including|like|via|through|near|under|over)\b",
    re.I,
)


def statements(content: str) -> list[str]:
    """The statements of a memory, as spans of its text in order: one for a memory of one fact."""
    cuts = [0, *(k for m in _STATEMENT_BREAK.finditer(content) for k in (m.start(), m.end())), len(content)]
    spans = [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts), 2)]
    out: list[tuple[int, int]] = []
    pending: int | None = None  # where a short opening piece starts, kept for the next statement
    for a, b in spans:
        words = {t for t in _tokens(content[a:b]) if t not in STOPWORDS and t not in _FIRST and t not in _WE}
        modifies = bool(out) and _MODIFIER.match(content, a) is not None
        if len([w for w in words if len(w) > 1]) >= _STATEMENT_WORDS and not modifies:
            out.append((a if pending is None else pending, b))
            pending = None
        elif out:
            out[-1] = (out[-1][0], b)
        elif pending is None:
            pending = a
    if pending is not None:  # no piece of two content words: one statement
        out = [(pending, len(content))]
    return [t for a, b in out if (t := content[a:b].strip(" ,;.!?"))] or [content]


def covers(newer: str, older: str) -> bool:
    """Whether ``newer`` says something about every statement of ``older`` (``statements``): each
    names an attribute the newer names, or shares a rarer word with it that is neither's subject.
    "Tidepool switched its cache to sled" covers "Tidepool uses Redis for its cache", not
    "Tidepool uses Redis for its cache and targets v0.3 in March": its v0.3 still holds, so the
    older stays current (a wrong mark would hide it)."""
    parts = statements(older)
    if len(parts) < 2:
        return True
    rn, ro = _read(newer), _read(older)
    who = {w for s in (rn.subject, ro.subject) if s for w in s.replace("@", " ").split()}
    return all(_covered(_read(p), rn, who) for p in parts)


def _covered(part: _Read, newer: _Read, who: set[str]) -> bool:
    if part.families & newer.families:
        return True
    own = {w for w in _plain(set(part.words)) if not any(same_word(w, x) for x in who)}
    shared = {w for w in own if any(same_word(w, x) for x in newer.words)}
    return not own or any(token_rank(w) >= _RARE_RANK and not w.isdigit() for w in shared)


def _same_attribute(a: _Read, b: _Read) -> bool:
    if a.families & b.families:
        return True
    who = {a.subject, b.subject} | _relation_words(a.subject) | _relation_words(b.subject)
    shared = {w for w in a.words if any(same_word(w, x) for x in b.words)} - who
    return any(token_rank(w) >= _RARE_RANK and not w.isdigit() for w in _plain(shared))


def _same_subject(a: _Read, b: _Read) -> bool:
    """Whether two texts are about one thing: the same subject; or a team's "we" and a thing the
    team's text names ("We switched transactional email to Postmark" and "Transactional email goes
    through SendGrid"); or two things, one named in the other ("Version 4.3 of the iOS app" and
    "Our iOS app's current release"). Never "I" and another, nor one person and another."""
    sa, sb = a.subject, b.subject
    if sa is None or sb is None:
        return False
    if sa == sb:
        return True
    if {sa.split("@")[0], sb.split("@")[0]} == {"i", "we"} and sa.partition("@")[2] == sb.partition("@")[2]:
        return True  # "I live in Manchester", then "We moved to Edinburgh"
    if _first_person(sa) or _first_person(sb) or _is_person(sa) or _is_person(sb):
        return False
    if a.named and b.named:
        return False  # two names: two people, or two products
    if sa == "we":
        return _names(sb, a.words)
    if sb == "we":
        return _names(sa, b.words)
    return _names(sa, b.words) or _names(sb, a.words)


def _relation_words(subject: str | None) -> set[str]:
    """The words of a subject that is a person named by a relation ("my partner")."""
    return set(subject.split()) if subject and _is_person(subject) else set()


def _first_person(subject: str) -> bool:
    return subject.split("@")[0] == "i" or (subject.startswith("we@"))


def _is_person(subject: str) -> bool:
    """A relation ("my partner", "Kenji's parents") or a name capitalised as a person's is."""
    return " " in subject and (subject.startswith(("my ", "our ")) or "'s " in subject)


def _names(subject: str, words: frozenset[str]) -> bool:
    return all(any(same_word(part, w) for w in words) for part in subject.split())


def _same_thing_new_owner(rn: _Read, ro: _Read) -> bool:
    """ "Priya took over the billing service" after "Dana owns the billing service": the subjects
    differ, the thing owned is the same, and the newer says it changed hands."""
    if not (rn.families & ro.families & {_OWNER}) or not (rn.change or ro.change):
        return False
    shared = {w for w in rn.words if any(same_word(w, x) for x in ro.words)} - {rn.subject, ro.subject}
    return any(token_rank(w) >= _RARE_RANK for w in _plain(shared) if not _in_family(w, _FAMILIES[_OWNER][1]))


def judge(new: Text, old: Text, similarity: float) -> Verdict | None:
    """What ``new`` (just stored) does to ``old`` (stored before, current), or None."""
    if similarity < MIN_SIMILARITY or new.id == old.id or not (_short(new.content) and _short(old.content)):
        return None
    rn, ro = _read(new.content), _read(old.content)
    if len(rn.words) > MAX_WORDS or len(ro.words) > MAX_WORDS or rn.asks or ro.asks:
        return None
    if rn.subject is None or not _same_attribute(rn, ro):
        return None
    if not _same_subject(rn, ro) and not _same_thing_new_owner(rn, ro):
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
    if (ro.event or rn.event) and not rnewer.change:
        return None  # two reports of events: both happened
    if not only_new or not only_old or rnewer.additive:
        return None  # a restatement, or news that adds to what was known
    if not (rn.families & ro.families) and not (_values(only_new, rn) or _values(only_old, ro)):
        return None  # no kind of fact named, and no name or number changed: talk, not a fact
    if new.valid_from == old.valid_from and not rnewer.change:
        # Nothing orders them: both kept, marked, for the client to ask which is right.
        return Verdict(old=old.id, new=new.id, kind="conflicts") if rn.single and ro.single else None
    # Unsaid: the newer does not say it changed. Then the attribute holds one value at a time (no
    # family of many values, such as pets), and the two are close.
    many = any(not _FAMILIES[i][0] for i in rn.families | ro.families)
    unsaid = not (rn.negated or ro.negated or many) and (
        (rnewer.single and bool(rn.families & ro.families) and similarity >= UNSAID_SIMILARITY)
        or (similarity >= RESTATED_SIMILARITY and _values(only_new, rn) and _values(only_old, ro))
    )
    if (rnewer.change or unsaid) and covers(newer.content, older.content):
        return Verdict(old=older.id, new=newer.id, kind="replaces")
    return None  # no reason to replace, or it replaces a part: what the older says besides holds


def same_fact(a: str, b: str) -> bool:
    """Whether two stored statements are values of one fact (one subject, one attribute), read
    looser than ``judge``: no change said, no value compared, one of them possibly an event. Recall
    orders by it, and a wrong guess there only reorders; ``judge`` marks, and a wrong mark there
    would hide evidence."""
    if a == b or not (_short(a) and _short(b)):
        return False
    ra, rb = _read(a), _read(b)
    if len(ra.words) > MAX_WORDS or len(rb.words) > MAX_WORDS or ra.asks or rb.asks:
        return False
    if ra.subject is None or rb.subject is None or (ra.event and rb.event):
        return False  # two reports of events: both happened
    if not _same_attribute(ra, rb):
        return False
    return _same_subject(ra, rb) or _same_thing_new_owner(ra, rb) or _same_thing_new_owner(rb, ra)


def answers_as_well(question: str, older: str, newer: str) -> bool:
    """Whether ``newer`` names everything of ``question`` that ``older`` names, apart from the
    attribute's words: "my 1:1 with Sofia moved" does not answer "when is my 1:1 with Marcus?" as
    well as "my 1:1 with Marcus is on Mondays" does, though both are one kind of fact."""
    rq, ro, rn = _read(question), _read(older), _read(newer)
    # The attribute may be worded otherwise ("where does she live?": "her new place is in Berlin"),
    # unless the newer names another one ("terminal" asked, "editor" said).
    skip = rq.families if (rn.families & rq.families or not rn.families) else frozenset()
    # Numbers count, one digit too ("big note 3" is not "big note 5").
    asked = rq.words | {t for t in _tokens(question) if t.isdigit()}
    old = ro.words | {t for t in _tokens(older) if t.isdigit()}
    new = rn.words | {t for t in _tokens(newer) if t.isdigit()}
    for w in asked:
        if w in _LINKING or any(_in_family(w, _FAMILIES[i][1]) for i in skip):
            continue
        if any(same_word(w, x) for x in old) and not any(same_word(w, x) for x in new):
            return False
    return True


def whose(question: str) -> str | None:
    """Whom a question asks about: its first name, else "i" ("what car do I drive?"), else None.
    A relation asked about ("where does Priya's husband work?") is None: its relatives are what is
    asked; so is "we": a team's facts are its members' too."""
    r = _read(question)
    if r.subject is None or _is_person(r.subject) or any(w in _RELATIONS for w in r.words):
        return None
    if r.named or r.subject == "i":
        return r.subject
    if r.subject == "we":
        return None
    names = [e.key for e in _extracted(question) if e.kind == "name"]
    if names:
        return names[0]  # "what pet does Luca have?"
    toks = set(_tokens(question))
    return "i" if toks & _FIRST and not toks & _WE else None


def about_someone_else(content: str, person: str) -> bool | None:
    """For a short statement: False when it is about ``person`` (a key of ``whose``), True when
    about another person (a relative of theirs, or another name), None when not about a person or
    too long to tell."""
    if not _short(content):
        return None
    r = _read(content)
    if r.subject is None or len(r.words) > MAX_WORDS:
        return None
    said = r.subject.split("@")[0]
    if said == person or (person == "i" and said == "we"):
        return False  # "we moved to Edinburgh" answers "where do I live?"
    if _is_person(r.subject) or r.named:
        return True
    return None


def may_decide(content: str) -> bool:
    """Whether a text is a statement of one fact, which alone can supersede or be superseded:
    what ``judge`` would refuse for any neighbour, known before its neighbours are read."""
    if not _short(content):
        return False
    r = _read(content)
    return len(r.words) <= MAX_WORDS and r.subject is not None


@functools.lru_cache(maxsize=8192)
def _short(content: str) -> bool:
    """A cheap first look: a statement, short enough to be one fact. Counted without the names
    (the full read finds them, at ~1 ms a text)."""
    if "?" in content:
        return False
    words = {t for t in _tokens(content) if t not in STOPWORDS and len(t) > 1}
    return len(words) <= MAX_WORDS + 2  # "I'm", "my", a speaker's label: not content words


def decide(new: Text, neighbours: Sequence[tuple[Text, float]]) -> list[Verdict]:
    """The verdicts about ``new`` among its current ``neighbours`` (text, cosine similarity).
    A memory dated earlier than a neighbour can be superseded by it, never supersede it.

    A new statement replaces one earlier statement, its predecessor: of several that qualify, the
    closest ("my 1:1 with Sofia moved" replaces the 1:1 with Sofia, not the one with Marcus, which
    qualifies too). Likewise it is replaced by at most one, the closest newer."""
    return pick(new, [(v, sim) for old, sim in neighbours if (v := judge(new, old, sim)) is not None])


def pick(new: Text, judged: Sequence[tuple[Verdict, float]]) -> list[Verdict]:
    """Of the verdicts about ``new`` (with each neighbour's similarity): its closest predecessor,
    its closest successor, and every conflict."""
    conflicts = [v for v, _ in judged if v.kind == "conflicts"]
    replaces = [(v, sim) for v, sim in judged if v.kind == "replaces" and v.new == new.id]
    replaced = [(v, sim) for v, sim in judged if v.kind == "replaces" and v.old == new.id]
    best = [max(group, key=lambda p: p[1])[0] for group in (replaces, replaced) if group]
    return best + conflicts


def shares_subject(new: Text, old: Text, similarity: float) -> bool:
    """Whether ``old`` is a candidate the ``supersede`` LLM stage is asked about: a short statement
    close enough, about the new one's subject (or the same thing, owned by someone else)."""
    if similarity < MIN_SIMILARITY or new.id == old.id or not (_short(new.content) and _short(old.content)):
        return False
    rn, ro = _read(new.content), _read(old.content)
    if len(rn.words) > MAX_WORDS or len(ro.words) > MAX_WORDS or rn.asks or ro.asks or rn.subject is None:
        return False
    return _same_subject(rn, ro) or _same_thing_new_owner(rn, ro) or _same_thing_new_owner(ro, rn)


def verdict_of(new: Text, old: Text, relation: str) -> Verdict | None:
    """The verdict an LLM's relation ("replaces", "replaces_part", "adds_to", "contradicts",
    "unrelated") makes, ordered by valid time: a new statement dated earlier than the one it
    "replaces" is the one replaced. A part replaced leaves the memory current: what else it says
    holds."""
    if relation == "replaces":
        if new.valid_from >= old.valid_from:
            return Verdict(old=old.id, new=new.id, kind="replaces")
        return Verdict(old=new.id, new=old.id, kind="replaces")
    if relation == "contradicts":
        return Verdict(old=old.id, new=new.id, kind="conflicts")
    return None
