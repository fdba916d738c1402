"""Stage 9, token-budgeted assembly: the best memories that fit in ``max_tokens`` and ``limit``."""

from __future__ import annotations

from .records import Candidate
from .tokens import count_tokens


def render(c: Candidate) -> str:
    """The text a memory costs in the client's context (what the token budget counts)."""
    return c.memory.content


def assemble(candidates: list[Candidate], *, limit: int, max_tokens: int) -> tuple[list[Candidate], int]:
    """Greedy in rank order: a memory that does not fit is skipped and smaller ones after it may
    still fit, so one long memory does not starve the rest of the budget."""
    chosen: list[Candidate] = []
    used = 0
    for c in candidates:
        if len(chosen) >= limit:
            break
        cost = count_tokens(render(c))
        if used + cost > max_tokens:
            continue
        chosen.append(c)
        used += cost
    return chosen, used
