"""Names a person would give a group of memories: noun phrases, offline, no model (``topics.py``
names a new automatic topic with ``label``; with an LLM the ``topics`` stage names them instead).

A category is a thing, so a label is a noun phrase of the memories: "editor", "japan trip",
"kitchen renovation", never a verb with its object ("ran marathon") or two rare words from either
end of a sentence ("backend engineer" on an editor preference). There is no part-of-speech model
here, so phrases are chunked by rules over the words:

- a phrase is a run of content words inside a clause: function words (stopwords, pronouns,
  prepositions, modals), numbers, adverbs (-ly) and verbs end it, and so do punctuation and a
  possessive ("the user's sister": "user", then "sister");
- a word is a verb when it is a known verb form (``_VERBS`` and their inflections, or a past form
  in -ed) standing where verbs stand: after a phrase or a pronoun ("Tidepool *syncs*"), after
  "to", a modal or "not", or first in a sentence in its base form (an instruction: "*Keep* answers
  short"). The same words after an article, a number or an adjective are nouns ("the *sync* job",
  "four *runs* a week");
- a capitalised name right after a lower-case noun starts a phrase of its own ("sister | Ana"),
  while a name before nouns modifies them ("Berlin marathon");
- the label is the phrase's last two words at most (modifier and head), without the vague words
  that say nothing alone (``_VAGUE``: "user", "time", "thing", time words).

One memory: its first phrase whose head is not vague (the subject, or the object when the subject
is the user: "User ran the Berlin marathon" is "berlin marathon"). Several memories: the word that
most of them name in a phrase (as a head first), with the modifier most of them give it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memlane.pipeline.words import STOPWORDS, token_rank

MAX_WORDS = 2  # modifier and head: "kitchen renovation", "japan trip"

_TOKEN = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-'’&.][A-Za-z0-9]+)*(?:['’]s?)?|\d[\d.,:%]*|[^\sA-Za-z\d]")
# A turn's speaker ("Caroline: ...", "Dr Patel: ..."): one to three capitalised words.
_SPEAKER = re.compile(r"^\s*[A-Z][\w.'-]*(?: [A-Z][\w.'-]*){0,2}:\s+")
_POSSESSIVE = re.compile(r"['’]s?$")

# Words that start or sit inside a clause without naming anything, beyond the stopwords.
_FUNCTION = (
    frozenset(
        """a an the this that these those my your his her its our their mine yours ours theirs
    i me we us you he him she they them it who whom whose which what whatever whoever
    would could should must might may shall will can cannot can't won't don't doesn't didn't isn't
    aren't wasn't weren't hasn't haven't hadn't wouldn't couldn't shouldn't i'm i've i'd i'll
    via per across within without towards toward onto upon near since until among amongst along
    around beside besides behind beyond inside outside despite except unless whether though although
    either neither also even ever never always often sometimes usually already still yet just only
    every each another any some many much more most few several all both none no not nor
    there here then than so such very too quite rather really almost about instead else
    one ones something anything nothing everything someone anyone everyone nobody somebody
    etc e.g i.e vs like unlike soon please thanks thank hello hi hey yes yeah sorry maybe perhaps
    two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred
    thousand dozen back""".split()
    )
    | STOPWORDS
)
# Nouns too vague to name a category alone (they may still modify: "user settings").
_VAGUE = frozenset(
    """user users person people thing things stuff time times way ways lot lots kind kinds sort
    part parts place places day days week weeks month months year years hour hours minute minutes
    second seconds today tomorrow yesterday morning afternoon evening night nights weekend
    weekends end start beginning number numbers amount example examples idea ideas fact facts
    reason reasons case cases point points side sides type types bit bits detail details thing's
    first last next other others new old good bad great nice little big small long short full
    same different whole own main usual able sure fine ok okay well best better worse worst
    monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays
    fridays saturdays sundays january february march april june july august september october
    november december spring summer autumn winter daily weekly monthly yearly nightly
    mr mrs ms dr""".split()
)
# Words that follow a phrase without being part of what it names ("the marathon last September").
# And adjectives after a noun say something of it ("keep answers short").
_TRAILING = frozenset(
    """first last next ago later earlier again before after new old good bad great nice little big
    small long short full same different whole own main usual able sure fine ok okay well best
    better worse worst""".split()
)
# Words in -ly that are not adverbs.
_LY_WORDS = frozenset(
    """family daily weekly monthly yearly nightly hourly quarterly supply reply italy july assembly
    rally belly jelly ally anomaly monopoly butterfly lily holly bully""".split()
)
# Common verbs in their base form (inflections are derived); those that are nouns too ("run",
# "sync", "plan") are read by their place in the clause.
_VERB_BASES = """be have do go get make take give keep let put set say see come know think look want
need use find tell ask work seem feel try leave call move live play run start stop turn show hear
begin help talk bring hold write read sit stand lose pay meet include continue learn change lead
understand watch follow create speak spend grow open walk win offer remember love consider appear
buy wait serve die send expect build stay fall cut reach kill remain suggest raise pass sell
require report decide pull prefer like enjoy hate switch sync book plan drink eat cook travel visit
call practise practice train deploy release merge ship fix break fail retry resume restore
replace avoid choose track test review aim mark rename migrate upgrade install configure enable
disable store save share join happen become provide allow add believe receive return explain
develop carry drive hope check wish handle manage depend mean forget drop miss rely finish complete
cover apply agree fit sleep wake wear teach catch notice print push tend belong roll
revert suggest cost back""".split()
_IRREGULAR = """was were been is are am has had did done went gone got gotten made took taken gave
given kept said saw seen came knew known thought looked found told left felt brought held wrote
written read sat stood lost paid met led understood spoke spoken spent grew grown won bought built
fell fallen cut sent ran began begun chose chosen broke broken ate eaten drank drunk goes does""".split()
_MODAL_BEFORE = frozenset(
    """to not never always will would can could should must might may also often usually is are was
    were be been am and or but then""".split()
)
# What follows a plural subject: "integration tests are", "deploys need".
_PLURAL_AUX = frozenset("are were have do don't can will must should would could may might".split())
_SUBJECTS = frozenset("i we you he she they it who that which user users".split())
_DETERMINERS = frozenset(
    """a an the this that these those my your his her its our their every each another any some
    no several many few one two three four five six seven eight nine ten per 's""".split()
)


def _inflect(base: str) -> set[str]:
    if base.endswith("e"):
        forms = {base + "s", base + "d", base[:-1] + "ing"}
    elif base.endswith("y") and base[-2:-1] not in "aeiou":
        forms = {base[:-1] + "ies", base[:-1] + "ied", base + "ing"}
    elif base.endswith(("s", "sh", "ch", "x", "z")):
        forms = {base + "es", base + "ed", base + "ing"}
    else:
        forms = {base + "s", base + "ed", base + "ing", base + base[-1] + "ed", base + base[-1] + "ing"}
    return {base, *forms}


_VERBS = frozenset(set(_IRREGULAR).union(*(_inflect(b) for b in _VERB_BASES)))
_BASES = frozenset(_VERB_BASES)


@dataclass(frozen=True, slots=True)
class Phrase:
    words: tuple[str, ...]  # lower case, possessives dropped
    capitals: tuple[bool, ...]  # each word as written started with a capital (first words too)

    @property
    def head(self) -> str | None:
        """The word the phrase is about (its last, before trailing time words), or None when vague."""
        name = self.label()
        return name.split()[-1] if name else None

    def label(self) -> str | None:
        """Its last ``MAX_WORDS`` words without vague ones, or None when its head is vague."""
        words = list(self.words)
        while words and words[-1] in _TRAILING:
            words.pop()  # "the Berlin marathon last (September)"
        if not words or words[-1] in _VAGUE:
            return None  # "half (an) hour", "ten minutes"
        return " ".join([w for w in words if w not in _VAGUE][-MAX_WORDS:])


def _kind(token: str) -> str:
    """ "break" (punctuation, a number), "function", or "word"."""
    if not token[0].isalpha():
        return "end" if token in ".!?;" else "break"
    w = _POSSESSIVE.sub("", token.lower())
    if w in _FUNCTION:
        return "function"
    if len(w) > 4 and w.endswith("ly") and w not in _LY_WORDS:
        return "function"  # an adverb
    return "word"


def _known_verb(word: str) -> bool:
    return word in _VERBS or (len(word) > 4 and word.endswith("ed"))


def _is_verb(word: str, prev: str | None, prev_word: str | None, nxt: str | None, initial: bool) -> bool:
    """Whether a known verb form is a verb where it stands (see the module's docstring). ``prev``:
    the word or function word before it, None after punctuation; ``prev_word``: the phrase word
    right before it, if any; ``nxt``: the next word, if any."""
    if not _known_verb(word) or prev in _DETERMINERS:
        return False  # "the sync job", "four runs", "the user's running shoes"
    if prev_word is not None and prev_word.endswith("ed"):
        return False  # "a failed deploy": a participle describes the noun after it
    if initial:
        if word.endswith("ing"):
            return False  # "Training plan for ..."
        # An instruction starts with a verb ("Keep answers short"), a statement with its subject,
        # whose verb follows ("Sync keeps a cursor", "Deploys to staging happen").
        return (word in _BASES or word in _IRREGULAR) and not (nxt is not None and _known_verb(nxt))
    if (
        prev_word is not None
        and word.endswith("s")
        and nxt is not None
        and (nxt in _BASES or nxt in _PLURAL_AUX)
    ):
        return False  # "production deploys need": a plural subject, its verb next
    if prev_word is not None and word in _BASES and not prev_word.endswith("s"):
        return False  # after a singular noun a verb takes -s: "training plan", "data sync"
    if prev_word is not None or prev in _SUBJECTS or prev in _MODAL_BEFORE:
        return True  # "Tidepool syncs", "wants to book", "is planning", "and keeps"
    if word.endswith("ing"):
        return prev is not None  # "started learning guitar"; after punctuation a gerund subject
    return word.endswith("ed") or word in _IRREGULAR  # a past form ("was booked"); else a noun ("at work")


def phrases(text: str) -> list[Phrase]:
    """The text's noun phrases in order."""
    tokens = _TOKEN.findall(_SPEAKER.sub("", text, count=1))
    kinds = [_kind(t) for t in tokens]
    out: list[Phrase] = []
    run: list[tuple[str, bool]] = []

    def flush() -> None:
        if run:
            out.append(Phrase(tuple(w for w, _ in run), tuple(c for _, c in run)))
            run.clear()

    prev: str | None = None
    initial = True
    for i, (token, kind) in enumerate(zip(tokens, kinds, strict=True)):
        if kind != "word":
            flush()
            prev = None if kind in ("break", "end") else _POSSESSIVE.sub("", token.lower())
            # A sentence starts after its end, and still after an opening quote or bracket.
            initial = kind == "end" or (initial and kind == "break" and token in "\"'(“[")
            continue
        word = _POSSESSIVE.sub("", token.lower())
        capital = token[0].isupper()
        nxt = tokens[i + 1].lower() if i + 1 < len(tokens) and kinds[i + 1] in ("word", "function") else None
        prev_word = run[-1][0] if run else None
        if not (capital and not initial) and _is_verb(word, prev, prev_word, nxt, initial):
            flush()  # a name mid-sentence is never a verb ("JR Pass")
            prev = word
        else:
            if run and capital and not initial and not run[-1][1]:
                flush()  # "sister Ana": the name is a phrase of its own
            if len(word) > 1:
                run.append((word, capital))
            prev = word
            if word != token.lower():
                flush()  # a possessive ends the phrase: "the user's | sister"
                prev = "'s"
        initial = False
    flush()
    return out


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def head_noun(label: str) -> str:
    """A label's last word in the singular: what two labels of one thing share."""
    words = label.lower().split()
    return _singular(words[-1]) if words else ""


def label(texts: Sequence[str]) -> str | None:
    """A category name for these memories (one or several), or None when they name nothing but
    vague words."""
    if len(texts) == 1:
        for p in phrases(texts[0]):
            name = p.label()
            if name:
                return name
        return None
    df: Counter[str] = Counter()  # texts naming the word in a phrase
    heads: Counter[str] = Counter()  # texts naming it as a phrase's head
    forms: dict[str, Counter[str]] = {}  # the word as written, per singular
    pairs: dict[str, Counter[str]] = {}  # modifier + head, per head's singular
    first: dict[str, int] = {}  # the earliest text naming it
    for i, text in enumerate(texts):
        seen: set[str] = set()
        seen_heads: set[str] = set()
        for p in phrases(text):
            name = p.label()
            for w in p.words:
                if w in _VAGUE:
                    continue
                s = _singular(w)
                seen.add(s)
                forms.setdefault(s, Counter())[w] += 1
                first.setdefault(s, i)
            if name and p.head:
                s = _singular(p.head)
                seen_heads.add(s)
                if " " in name:
                    pairs.setdefault(s, Counter())[name.split()[0]] += 1
        df.update(seen)
        heads.update(seen_heads)
    if not df or max(df.values()) < 2:
        return label(texts[:1])  # nothing shared: the first memory's phrase
    best = min(df, key=lambda s: (-df[s], -heads[s], first[s], token_rank(s), s))
    word = min(forms[best], key=lambda w: (-forms[best][w], len(w), w))
    modifier = pairs.get(best, Counter()).most_common(1)
    if modifier and modifier[0][1] >= 2:
        return f"{modifier[0][0]} {word}"
    return word
