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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from . import render
from .errors import InvalidInput
from .records import Candidate
from .tokens import count_tokens

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


@dataclass(slots=True)
class Packed:
    chosen: list[Candidate]
    rendered: dict[str, Any]  # what the client's model reads (render.to_text of it is the text block)
    tokens_used: int


def _settle(memories: list[dict[str, Any]], note: str | None) -> tuple[dict[str, Any], int]:
    """The rendered result and its exact token count, ``tokens_used`` included: iterate
    ``n = count(render(n))`` from below; the count only grows with n's digits, so it converges in
    two or three rounds."""
    n = 0
    while True:
        body = render.envelope(memories, n, note)
        cost = count_tokens(render.to_text(body))
        if cost == n:
            return body, n
        if cost < n:  # cannot happen with cl100k (digits are their own pre-tokens); be safe anyway
            return render.envelope(memories, cost, note), n
        n = cost


def pack(
    candidates: list[Candidate],
    *,
    limit: int,
    max_tokens: int,
    handles: dict[UUID, str] | None = None,
    explain: bool = False,
) -> Packed:
    """Greedy in rank order: a memory that does not fit is skipped and smaller ones after it may
    still fit, so one long memory does not starve the rest of the budget. Per-memory counts are an
    estimate of their share of the whole (BPE can merge across a boundary); the exact count of the
    final result decides, dropping the last memory taken until it fits."""
    handles = handles or {}
    _, bare = _settle([], None)
    if max_tokens < bare:
        raise InvalidInput(f"max_tokens={max_tokens} is below the smallest possible result ({bare} tokens)")
    show_project = len({c.memory.project for c in candidates}) > 1
    chosen: list[tuple[Candidate, dict[str, Any]]] = []
    # The envelope plus a comma per memory and the digits of tokens_used (up to 2 tokens).
    used = bare + 1
    for c in candidates:
        if len(chosen) >= limit or max_tokens - used < MIN_MEMORY_TOKENS:
            break
        view = render.memory_view(
            c.memory,
            handles.get(c.memory.id) or render.handle_of(c.memory.id),
            score=c.score,
            show_project=show_project,
            explain=explain,
        )
        cost = count_tokens(render.to_text(view)) + 1
        if used + cost > max_tokens:
            continue
        chosen.append((c, view))
        used += cost
    while True:
        note = None
        if not chosen:
            note = NOTE_NOTHING if not candidates else NOTE_NO_FIT.format(max_tokens=max_tokens)
        body, tokens = _settle([v for _, v in chosen], note)
        if tokens <= max_tokens:
            break
        if chosen:
            chosen.pop()
        else:  # the note itself does not fit a tiny budget: the bare result does (checked above)
            body, tokens = _settle([], None)
            break
    return Packed(chosen=[c for c, _ in chosen], rendered=body, tokens_used=tokens)


async def assemble(
    candidates: list[Candidate],
    *,
    limit: int,
    max_tokens: int,
    explain: bool = False,
    handles: HandleLookup | None = None,
) -> Packed:
    """Look up the handles of the memories that may be returned, then pack in a worker thread:
    counting tokens is CPU work that would otherwise hold up every other request on the loop."""
    found = await handles([c.memory.id for c in candidates]) if handles and candidates else {}
    return await asyncio.to_thread(
        pack, candidates, limit=limit, max_tokens=max_tokens, handles=found, explain=explain
    )
