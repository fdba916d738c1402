"""A scripted LLM provider for deterministic tests: replies queued per stage (or the stub's canned
answer), injectable faults and delays, and a record of every call with its start and end."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from typing import Any

from memlane.pipeline.providers.llm.base import LLMError, LLMReply
from memlane.pipeline.providers.llm.stub import canned_reply, stage_of


class ScriptedLLM:
    name = "scripted"
    model = "scripted-1"

    def __init__(self, delay_s: float | dict[str, float] = 0.0) -> None:
        self.queues: dict[str | None, deque] = defaultdict(deque)
        self.delay_s = delay_s
        self.calls: list[dict[str, Any]] = []

    def enqueue(self, stage: str, *replies: Any) -> ScriptedLLM:
        """Queue replies for a stage: text, an exception to raise, or a callable(system, user)."""
        self.queues[stage].extend(replies)
        return self

    def calls_for(self, stage: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["stage"] == stage]

    async def complete(self, *, system: str, user: str, schema=None) -> LLMReply:
        stage = stage_of(system)
        call = {"stage": stage, "system": system, "user": user, "start": time.monotonic()}
        self.calls.append(call)
        delay = self.delay_s.get(stage, 0.0) if isinstance(self.delay_s, dict) else self.delay_s
        if delay:
            await asyncio.sleep(delay)
        reply = self.queues[stage].popleft() if self.queues[stage] else canned_reply(stage, user)
        call["end"] = time.monotonic()
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            reply = reply(system, user)
        return LLMReply(text=reply, model=self.model, usage={"input_tokens": 100, "output_tokens": 10})


def failing(reason: str = "HTTP 503") -> LLMError:
    return LLMError(reason)
