"""A step of stage 8 (``run.py``'s ``STAGE8_STEPS``): a statement above its echo.

A chat stored turn by turn holds each fact twice: the user's statement ("user: let's end the first
sprint on March 29") and the assistant's reply that restates it at length ("assistant: Here is a
sprint plan for the first sprint, ending on March 29: ..."). The reply has more words for the arms
to match and often ranks first; the statement is the fact as the user gave it. When a reply ranks
above the user turn it answers (the user's turn stored last before it, among the candidates) and
the two share at least ``SHARED`` uncommon words, the statement is moved just above the reply.
Neither is dropped. The roles are read from the speaker label a chat turn is stored with ("user:",
"assistant:"; also "human:", "me:", "ai:").
"""

from __future__ import annotations

import re

from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.recall.threshold import informative_words
from memlane.pipeline.records import Candidate, Memory

# Uncommon words (cl100k id at or above ``RARE``) a reply must share with the statement it echoes.
SHARED = 2
RARE = 3000
WINDOW = 20  # how far down the list the two are looked for
_ROLE = re.compile(r"^\s*(user|human|me|assistant|ai)\s*:", re.I)


def role(m: Memory) -> str | None:
    found = _ROLE.match(m.content)
    if found is None:
        return None
    return "assistant" if found.group(1).lower() in ("assistant", "ai") else "user"


def _rare(text: str) -> frozenset[str]:
    return informative_words(text[:4000], RARE)


async def statements_first(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    window = candidates[:WINDOW]
    roles = [role(c.memory) for c in window]
    if "assistant" not in roles or "user" not in roles:
        return Step(candidates, status="skipped: no user and assistant turns among the candidates")
    out = list(candidates)
    moved: list[list[str]] = []
    users = [c for c, r in zip(window, roles, strict=True) if r == "user"]
    for reply, r in zip(window, roles, strict=True):
        if r != "assistant":
            continue
        before = [u for u in users if u.memory.created_at < reply.memory.created_at]
        if not before:
            continue
        asked = max(before, key=lambda u: u.memory.created_at)
        i, j = out.index(reply), out.index(asked)
        if j < i or len(_rare(asked.memory.content) & _rare(reply.memory.content)) < SHARED:
            continue
        out.pop(j)
        out.insert(i, asked)
        moved.append([str(asked.memory.id), str(reply.memory.id)])
    if not moved:
        return Step(candidates, status="skipped: no reply ranked above the statement it echoes")
    return Step(out, detail={"moved_above": moved})
