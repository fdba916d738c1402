"""Stage 9, token-budgeted assembly: the best memories whose rendered result fits in ``max_tokens``
and ``limit``.

The budget bounds what the client's model reads: the whole compact result (``render.to_text`` of
``{"memories": [...], "tokens_used": N, "note": ...}``), counted with cl100k_base, not only the
memories' content. ``tokens_used`` is inside the result it counts, so its own digits are counted
too (see :func:`_settle`). The trace that ``explain=true`` adds is outside the budget: it is for
the developer reading it, and it is only complete after this stage has run.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ParamSpec, Protocol, TypeVar
from uuid import UUID

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall import render
from memlane.pipeline.recall.stage import cancel_all
from memlane.pipeline.records import Candidate
from memlane.pipeline.tokens import count_tokens

NOTE_NOTHING = (
    "No stored memory is relevant to this question: answer without memories (or ask the user), "
    "and remember what you learn."
)
NOTE_NO_FIT = (
    "Relevant memories exist but none fits in max_tokens={max_tokens}: ask again with a larger max_tokens."
)
# The cheapest memory there can be, '{"id":"0123abcd","content":"","date":"2024-01-01"},' is 19
# tokens; once less budget than that is left nothing more can fit, so counting stops.
MIN_MEMORY_TOKENS = 19

HandleLookup = Callable[[list[UUID]], Awaitable[dict[UUID, str]]]


class HandlesReadAhead:
    """A ``HandleLookup`` that has already started reading the handles of the memories likely to be
    taken (recall starts it after the relevance threshold, so the read runs beside stage 8); ids
    outside those are read when asked for. ``unique8``: ids whose 8-digit handle is known to be
    unique (retrieval read that with their rows): theirs is never read."""

    def __init__(self, read: HandleLookup, likely: list[UUID], unique8: Set[UUID] = frozenset()) -> None:
        self._read, self._unique8 = read, unique8
        likely = [i for i in likely if i not in unique8]
        self._ahead = asyncio.ensure_future(read(likely)) if likely else None

    @property
    def reading(self) -> bool:
        """Whether a read was started (none when every likely handle is known unique)."""
        return self._ahead is not None

    async def __call__(self, ids: list[UUID]) -> dict[UUID, str]:
        known: dict[UUID, str] = {i: render.handle_of(i) for i in ids if i in self._unique8}
        if self._ahead is not None and len(known) < len(ids):
            known.update(await asyncio.shield(self._ahead))
        missing = [i for i in ids if i not in known]
        if missing:
            known.update(await self._read(missing))
        return {i: known[i] for i in ids}

    def cancel(self) -> None:
        cancel_all([self._ahead])


# Shares of max_tokens kept for the recall extras when asked for (include_context, include_entities):
# the memories get the rest, each extra fills at most its share, and the whole result stays within
# max_tokens.
CONTEXT_SHARE = 0.25
ENTITY_SHARE = 0.2
HISTORY_SHARE = 0.2


@dataclass(slots=True)
class Extras:
    """What the extras may show: neighbours per memory id, (id, content, position); and entities
    with their facts, best first."""

    context: dict[UUID, list[tuple[UUID, str, int | None]]] | None = None
    entities: list[tuple[str, list[str]]] | None = None
    # include_history: the earlier versions a memory replaced, newest first (id, content, valid
    # from, valid until); store/supersession.py.
    history: dict[UUID, list[tuple[UUID, str, datetime, datetime | None]]] | None = None


# Counts of short rendered pieces (a memory's view, an extra's item) are kept: the same memories
# come back recall after recall, and counting was most of this stage's time. Bounded in entries
# and in the length of what is kept (4096 x 2048 characters at most).
CACHED_TEXT_CHARS = 2048


@functools.lru_cache(maxsize=4096)
def _cached_tokens(text: str) -> int:
    return count_tokens(text)


def _text_tokens(text: str) -> int:
    return _cached_tokens(text) if len(text) <= CACHED_TEXT_CHARS else count_tokens(text)


def _cost(obj: Any) -> int:
    return _text_tokens(render.to_text(obj)) + 1  # and a comma


def _add_context(
    chosen: list[tuple[Candidate, dict[str, Any]]],
    context: dict[UUID, list[tuple[UUID, str, int | None]]],
    budget: int,
) -> None:
    """Each chosen memory's neighbours, best memory first, while they fit in ``budget`` tokens."""
    _add_items(
        chosen,
        "context",
        lambda mid: [
            {"id": render.handle_of(n), "content": content, "position": position}
            for n, content, position in context.get(mid) or []
        ],
        budget,
    )


def _add_history(
    chosen: list[tuple[Candidate, dict[str, Any]]],
    history: dict[UUID, list[tuple[UUID, str, datetime, datetime | None]]],
    budget: int,
) -> None:
    """Each chosen memory's earlier versions, best memory first, while they fit in ``budget``."""
    _add_items(
        chosen,
        "history",
        lambda mid: [
            {"id": render.handle_of(v), "content": content, "date": _day(since)}
            | ({"valid_until": _day(until)} if until is not None else {})
            for v, content, since, until in history.get(mid) or []
        ],
        budget,
    )


def _add_items(
    chosen: list[tuple[Candidate, dict[str, Any]]],
    key: str,
    items_of: Callable[[UUID], list[dict[str, Any]]],
    budget: int,
) -> None:
    """Under ``key`` of each chosen memory's view, its items, best memory first, while they fit."""
    overhead = count_tokens(f',"{key}":[]')
    for c, view in chosen:
        added: list[dict[str, Any]] = []
        for item in items_of(c.memory.id):
            cost = _cost(item) + (overhead if not added else 0)
            if cost > budget:
                continue
            added.append(item)
            budget -= cost
        if added:
            view[key] = added


def _day(t: datetime) -> str:
    return t.astimezone(UTC).date().isoformat()


def _entity_list(entities: list[tuple[str, list[str]]], shown: set[str], budget: int) -> list[dict[str, Any]]:
    """Entities with the facts about them not already among the memories, within ``budget``."""
    out: list[dict[str, Any]] = []
    budget -= count_tokens(',"entities":[]')
    for name, facts in entities:
        entry: dict[str, Any] = {"name": name, "facts": []}
        base = _cost(entry)
        if base > budget:
            continue
        spent = base
        for fact in facts:
            if fact in shown:
                continue
            cost = _cost(fact)
            if spent + cost > budget:
                continue
            entry["facts"].append(fact)
            spent += cost
        if entry["facts"]:
            out.append(entry)
            budget -= spent
    return out


@dataclass(slots=True)
class Packed:
    chosen: list[Candidate]
    rendered: dict[str, Any]  # what the client's model reads (render.to_text of it is the text block)
    tokens_used: int


@functools.cache
def _digits_apart() -> bool:
    """Whether ``tokens_used``'s digits are counted apart from the result around them, whatever
    the memories: cl100k splits digits into pre-tokens of their own (at most three digits each),
    and the JSON on either side of them is the same in every result. Checked once per process,
    on results with and without memories, extras and a note."""
    view = {"id": "0123abcd", "content": 'a "quoted" 42', "date": "2024-01-01", "priority": 5}
    for body in (
        render.envelope([], 0),
        render.envelope([view, view], 0, "a note", [{"name": "x", "facts": ["y 7"]}]),
    ):
        base = count_tokens(render.to_text(body)) - count_tokens("0")
        for n in (1, 9, 10, 99, 100, 999, 1000, 4096, 12345, 123456, 1234567):
            if count_tokens(render.to_text(dict(body, tokens_used=n))) != base + count_tokens(str(n)):
                return False
    return True


def _settle(
    memories: list[dict[str, Any]], note: str | None, entities: list[dict[str, Any]] | None = None
) -> tuple[dict[str, Any], int]:
    """The rendered result and its exact token count, ``tokens_used`` included. cl100k splits
    digits into pre-tokens of their own, so the count is the count with ``0`` there plus the
    digits' tokens: solve ``n = base + tokens(str(n))`` on short strings. One full count, not two:
    the rule is checked once per process (``_digits_apart``); a tokenizer that broke it would be
    checked with full counts here, iterated until they agree."""
    body = render.envelope(memories, 0, note, entities)
    base = count_tokens(render.to_text(body)) - count_tokens("0")
    n = base + 1
    while (m := base + count_tokens(str(n))) != n:
        n = m
    body = render.envelope(memories, n, note, entities)
    if _digits_apart():
        return body, n
    cost = count_tokens(render.to_text(body))
    while cost != n:  # not reached with cl100k; converges: the count only grows with the digits
        n = cost
        body = render.envelope(memories, n, note, entities)
        cost = count_tokens(render.to_text(body))
    return body, n


@functools.cache
def _bare_cost() -> int:
    return _settle([], None)[1]


def pack(
    candidates: list[Candidate],
    *,
    limit: int,
    max_tokens: int,
    handles: dict[UUID, str] | None = None,
    explain: bool = False,
    show_project: bool = False,
    extras: Extras | None = None,
) -> Packed:
    """Greedy in rank order: a memory that does not fit is skipped and smaller ones after it may
    still fit, so one long memory does not starve the rest of the budget. Per-memory counts are an
    estimate of their share of the whole (BPE can merge across a boundary); the exact count of the
    final result decides, dropping the last memory taken until it fits."""
    handles = handles or {}
    bare = _bare_cost()
    if max_tokens < bare:
        raise InvalidInput(f"max_tokens={max_tokens} is below the smallest possible result ({bare} tokens)")
    show_project = show_project or len({c.memory.project for c in candidates}) > 1
    chosen: list[tuple[Candidate, dict[str, Any]]] = []
    extras = extras or Extras()
    context_budget = int(max_tokens * CONTEXT_SHARE) if extras.context is not None else 0
    entity_budget = int(max_tokens * ENTITY_SHARE) if extras.entities is not None else 0
    history_budget = int(max_tokens * HISTORY_SHARE) if extras.history is not None else 0
    memory_tokens = max_tokens - context_budget - entity_budget - history_budget
    # The envelope plus a comma per memory and the digits of tokens_used (up to 2 tokens).
    used = bare + 1
    # A text has at most as many tokens as UTF-8 bytes (every cl100k token is one byte or more).
    # While the taken memories' bytes fit the budget, each fits whatever its count: the counts
    # wait (``uncounted``) until a decision needs them, so the usual result, well within its
    # budget, counts only once, whole, in ``_settle``. The choices are those of exact counts.
    bound = used
    uncounted: list[str] = []

    def count_taken() -> int:
        nonlocal bound
        exact = used + sum(_text_tokens(text) + 1 for text in uncounted)
        uncounted.clear()
        bound = exact
        return exact

    for c in candidates:
        if len(chosen) >= limit:
            break
        if memory_tokens - bound < MIN_MEMORY_TOKENS:
            used = count_taken()
            if memory_tokens - used < MIN_MEMORY_TOKENS:
                break
        view = render.memory_view(
            c.memory,
            handles.get(c.memory.id) or render.handle_of(c.memory.id),
            score=c.score,
            show_project=show_project,
            explain=explain,
            adjustments=c.adjustments,
        )
        text = render.to_text(view)
        most = len(text.encode()) + 1
        if bound + most <= memory_tokens:
            chosen.append((c, view))
            uncounted.append(text)
            bound += most
            continue
        used = count_taken()
        cost = _text_tokens(text) + 1
        if used + cost > memory_tokens:
            continue
        chosen.append((c, view))
        used += cost
        bound = used
    if extras.context and chosen:
        _add_context(chosen, extras.context, context_budget)
    if extras.history and chosen:
        _add_history(chosen, extras.history, history_budget)
    entity_list: list[dict[str, Any]] = []
    if extras.entities and chosen:
        entity_list = _entity_list(extras.entities, {c.memory.content for c, _ in chosen}, entity_budget)
    while True:
        note = None
        if not chosen:
            note = NOTE_NOTHING if not candidates else NOTE_NO_FIT.format(max_tokens=max_tokens)
        body, tokens = _settle([v for _, v in chosen], note, entity_list)
        if tokens <= max_tokens:
            break
        # Over by a few tokens (BPE merges across boundaries): the extras give way first.
        with_extra = [(v, key) for key in ("history", "context") for _, v in reversed(chosen) if v.get(key)]
        if entity_list:
            entity_list.pop()
        elif with_extra:
            view, key = with_extra[0]
            view[key].pop()
            if not view[key]:
                del view[key]
        elif chosen:
            chosen.pop()
        else:  # the note itself does not fit a tiny budget: the bare result does (checked above)
            body, tokens = _settle([], None)
            break
    return Packed(chosen=[c for c, _ in chosen], rendered=body, tokens_used=tokens)


# Up to this many memories are packed on the event loop (well under a millisecond of token
# counting); more, in a worker thread, so a big result does not hold up every other request.
INLINE_PACK_LIMIT = 20


P = ParamSpec("P")
R = TypeVar("R")


class _Runner(Protocol):
    """Runs ``fn(*args, **kwargs)`` and gives its result to await (``asyncio.to_thread``'s shape)."""

    def __call__(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Awaitable[R]: ...


def _packing(limit: int) -> _Runner:
    if limit <= INLINE_PACK_LIMIT:

        async def inline(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
            return fn(*args, **kwargs)

        return inline
    return asyncio.to_thread


async def assemble(
    candidates: list[Candidate],
    *,
    limit: int,
    max_tokens: int,
    explain: bool = False,
    handles: HandleLookup | None = None,
    show_project: bool = False,
    extras: Extras | None = None,
) -> Packed:
    """Pack (in a worker thread for a large ``limit``: counting tokens is CPU work that would hold
    up every other request on the loop), then look up the handles of the memories taken (recall
    passes a ``HandlesReadAhead``, already reading them). An 8-digit handle is almost always unique
    (two ids of a store of 100,000 share their first 8 hex digits with a chance of 1 in 40,000 per
    id); when one needs more digits, its result costs more, so it is packed again."""
    known: dict[UUID, str] = {}
    while True:
        packed = await _packing(limit)(
            pack,
            candidates,
            limit=limit,
            max_tokens=max_tokens,
            handles=known,
            explain=explain,
            show_project=show_project,
            extras=extras,
        )
        missing = [c.memory.id for c in packed.chosen if c.memory.id not in known]
        if handles is None or explain or not missing:
            return packed
        known.update(await handles(missing))
        if all(known[mid] == render.handle_of(mid) for mid in missing):
            return packed  # the 8-digit handles it was packed with are the unique ones
