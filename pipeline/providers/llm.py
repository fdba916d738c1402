"""The interface the LLM stages (intent, synthesis, HyDE, rerank) call.

An object with this shape is handed to ``Engine(llm=...)``: an API client, or the MCP sampling
provider that ``memlane.server`` builds from a session (``pipeline`` never imports ``mcp``). Stages
that find no provider skip themselves and say so in the trace; a provider that raises degrades
only the stage that called it (``pipeline/stage.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class LLMReply:
    text: str
    model: str
    parsed: Any = None  # the JSON value, when a schema was asked for
    usage: dict[str, int] = field(default_factory=dict)  # input_tokens, output_tokens
    latency_ms: float = 0.0


@runtime_checkable
class LLM(Protocol):
    name: str

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        """One exchange: a system and a user message; with ``schema``, JSON matching it."""
        ...
