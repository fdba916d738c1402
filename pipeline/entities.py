"""Entities named in a text: the one extractor for memories (the write path's graph) and questions
(intent analysis, the graph arm's entry points). Pure functions, offline, no model; below the
store, which resolves entities when it writes their links.

What counts as an entity:

- **names**: runs of capitalised words ("Caroline", "New York", "Dr Patel"); a possessive is the
  owner ("Caroline's" is Caroline); a capitalised word that starts a sentence counts only if it is
  not a common English word ("The", "When", "Yesterday" are not names; "Caroline" is), and "I" is
  never one. Common words are read from the cl100k_base tokenizer the budget already uses
  (``words.token_rank``): a word that is one token with a low id is a frequent word.
- **technical terms**: CamelCase, snake_case, dotted and versioned names (``node.js``, ``v2.3.1``),
  letters with digits (``fp-700``, ``py3``);
- **@handles**, **e-mail addresses**, **URLs** and **file paths**.

Each entity has a ``key``, its normalised form (lower case, possessive and trailing punctuation
dropped, spaces collapsed), which resolves it to one node per project, and the ``name`` as first
written. ``resolve_aliases`` maps a lone first name to the one known full name that starts with it,
when there is exactly one (ambiguous: left alone).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from memlane.pipeline.words import STOPWORDS, token_rank

KINDS = ("name", "term", "handle", "email", "url", "path")
MAX_ENTITIES = 32  # per text: a long document names many things; the graph needs the first few dozen

_URL = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.I)
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_HANDLE = re.compile(r"(?<![\w@])@[A-Za-z0-9_][\w.-]*[A-Za-z0-9_]|(?<![\w@])@[A-Za-z0-9_]")
_PATH = re.compile(
    r"(?:(?<=\s)|^)(?:~?/[\w.-]+(?:/[\w.-]+)+/?|[\w.-]+(?:/[\w.-]+)+\.[A-Za-z0-9]{1,6})(?=[\s,;:)\]]|$|\.(?:\s|$))"
)
_TECH = re.compile(
    r"(?<![\w/@.-])(?:"
    r"[A-Za-z]+[a-z0-9]*[A-Z][A-Za-z0-9]*"  # CamelCase, iPhone, PostgreSQL
    r"|[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+"  # snake_case
    r"|[A-Za-z0-9]+(?:[.-][A-Za-z0-9]+)*\.[A-Za-z0-9]+"  # dotted names and versions
    r"|[A-Za-z]+-?\d[\w-]*"  # fp-700, v2, py3, COVID-19
    r")(?![\w@/-])"
)
_WORD = re.compile(r"[A-Za-z][\w’'&-]*")
_POSSESSIVE = re.compile(r"['’]s?$")
_SENTENCE_END = re.compile(r"[.!?:;\n\"“”(\[]\s*$")
# Words that are capitalised for reasons other than naming something, wherever they stand.
_NEVER_NAMES = frozenset(
    """i i'm i've i'd i'll ok okay hey hi hello yes yeah yep no nope wow oh ah um uh thanks thank lol
    omg btw""".split()
)
# Title words kept inside a name ("Dr Patel") but not a name alone.
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "st"})
# Lower-case words allowed inside a multi-word name ("Bank of America").
_JOINERS = frozenset({"of", "de", "van", "von", "der", "da", "la", "le", "del"})


@dataclass(frozen=True, slots=True)
class Entity:
    key: str  # normalised: one node per key per project
    name: str  # as written (possessive dropped)
    kind: str  # one of KINDS


def normalise(name: str) -> str:
    """The key an entity resolves by: lower case, no possessive, no trailing punctuation, single spaces."""
    words = [w for w in re.split(r"\s+", name.strip()) if w]
    if words:
        words[-1] = _POSSESSIVE.sub("", words[-1])
    out = " ".join(words).strip(" .,;:!?\"'’“”()[]{}").lower()
    return out


# A sentence-initial capitalised word is a common word, not a name, when its lower-case form is one
# cl100k_base token with an id under this: merges follow corpus frequency, so these are frequent
# words ("yesterday" 13985, "anyway", "sorry", "definitely"), while first names and places are
# several tokens in lower case or rarer ("john" 40742, "paris" 41958).
COMMON_WORD_RANK = 30000


@functools.cache
def is_common_word(word: str) -> bool:
    """A frequent English word (as in the relevance floor, with a wider rank)."""
    w = word.lower()
    if w in STOPWORDS or w in _NEVER_NAMES:
        return True
    return token_rank(w) < COMMON_WORD_RANK


def _strip_possessive(word: str) -> str:
    return _POSSESSIVE.sub("", word)


def _names(text: str, taken: list[tuple[int, int]]) -> list[tuple[int, str]]:
    """Runs of capitalised words, as (offset, name)."""
    out: list[tuple[int, str]] = []
    run: list[tuple[int, str]] = []  # (offset, word)
    last_end = -1

    def flush() -> None:
        while run and run[-1][1].lower() in _JOINERS:
            run.pop()
        while run and run[0][1].lower() in _TITLES and len(run) == 1:
            run.pop()
        if run:
            name = " ".join(w for _, w in run)
            if not (len(run) == 1 and run[0][1].lower() in _TITLES):
                out.append((run[0][0], name))
        run.clear()

    for m in _WORD.finditer(text):
        start, word = m.start(), m.group(0).rstrip("-&")
        if any(a <= start < b for a, b in taken):
            flush()
            continue
        bare = _strip_possessive(word)
        gap = text[last_end:start] if last_end >= 0 else ""
        contiguous = last_end >= 0 and re.fullmatch(r"[ \t]+", gap) is not None
        if not contiguous:
            flush()
        initial = last_end < 0 or bool(_SENTENCE_END.search(text[:start]))
        last_end = m.end()
        capital = bare[:1].isupper() and len(bare) > 1 or bare in ("X",)
        if run and contiguous and bare.lower() in _JOINERS and not capital:
            run.append((start, bare))
            continue
        if not capital or bare.lower() in _NEVER_NAMES:
            flush()
            continue
        if initial and not run and is_common_word(bare):
            continue  # "The", "When", "Yesterday" at the start of a sentence
        run.append((start, bare))
        if word != bare:  # a possessive ends the name: "Caroline's dog"
            flush()
    flush()
    return out


def extract(text: str, limit: int = MAX_ENTITIES) -> list[Entity]:
    """The entities of ``text``, in order of first appearance, one per key."""
    found: list[tuple[int, Entity]] = []
    taken: list[tuple[int, int]] = []

    def add(pattern: re.Pattern[str], kind: str, clean: Callable[[str], str] = lambda s: s) -> None:
        for m in pattern.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            raw = clean(m.group(0))
            if not raw:
                continue
            taken.append((m.start(), m.end()))
            found.append((m.start(), Entity(normalise(raw) if kind != "url" else raw.lower(), raw, kind)))

    add(_URL, "url", lambda s: s.rstrip(".,;:!?"))
    add(_EMAIL, "email")
    add(_HANDLE, "handle", lambda s: s.rstrip("."))
    add(_PATH, "path")

    for m in _TECH.finditer(text):
        if any(a < m.end() and m.start() < b for a, b in taken):
            continue
        term = m.group(0)
        bare = _strip_possessive(term)
        if re.fullmatch(r"[\d.]+", bare) or len(bare) < 2:
            continue  # numbers and decimals are not names
        if "." in bare and all(len(p) <= 1 for p in bare.split(".")):
            continue  # e.g, i.e, a.m
        if re.fullmatch(r"[A-Z][a-z]+", bare):
            continue  # a plain capitalised word is the name pass's business
        taken.append((m.start(), m.end()))
        found.append((m.start(), Entity(normalise(bare), bare, "term")))

    for start, name in _names(text, taken):
        found.append((start, Entity(normalise(name), name, "name")))

    out: list[Entity] = []
    seen: set[str] = set()
    for _, e in sorted(found, key=lambda x: x[0]):
        if e.key and e.key not in seen:
            seen.add(e.key)
            out.append(e)
            if len(out) >= limit:
                break
    return out


def resolve_aliases(entities: Iterable[Entity], known: Iterable[Entity]) -> list[Entity]:
    """Map each one-word name to the one known multi-word name that starts with it ("Caroline" ->
    "Caroline Smith" when she is the only Caroline with a surname); ambiguous or unknown: unchanged.
    Known full names include those in ``entities`` themselves. One entity per key in the result."""
    entities = list(entities)
    full: dict[str, set[str]] = {}
    names: dict[str, Entity] = {}
    for e in [*known, *entities]:
        if e.kind == "name" and " " in e.key:
            full.setdefault(e.key.split(" ", 1)[0], set()).add(e.key)
            names.setdefault(e.key, e)
    out: list[Entity] = []
    seen: set[str] = set()
    for e in entities:
        if e.kind == "name" and " " not in e.key and len(full.get(e.key, ())) == 1:
            [key] = full[e.key]
            e = names[key]
        if e.key not in seen:
            seen.add(e.key)
            out.append(e)
    return out


def first_names(entities: Iterable[Entity]) -> list[str]:
    """The one-word name keys (what ``resolve_aliases`` may map to a known full name)."""
    return sorted({e.key for e in entities if e.kind == "name" and " " not in e.key})
