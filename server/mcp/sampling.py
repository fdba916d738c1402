"""MCP sampling as an LLM provider: the connected client's own model answers the LLM stages, so
there is no key and no second bill. It needs the MCP session, so it lives here and reaches the
engine as an object with the pipeline's LLM interface (``Engine.recall(sampling=...)``).

Used only for stages configured with ``provider = "sampling"``, and only when the client declares
the sampling capability (VS Code does; Claude Desktop does not). The 2026-07-28 MCP specification
deprecates sampling (SEP-2577); the SDK still carries it within the deprecation window, so this is
an option, never the default. Two ways, by the connection's protocol:

- up to 2025-11-25 (the ``initialize`` handshake): ``sampling/createMessage`` is sent in the middle
  of the tool call, related to it, as the SDK's ``Sample`` resolver marker does; a refusal degrades
  the stage.
- 2026-07-28: the server cannot send a request mid-call. A stage whose answer is not there yet
  raises ``LLMDeferred``; the recall tool then returns ``InputRequiredResult`` with every pending
  ``sampling/createMessage`` (stages 1-3 together, rerank in a later round once the candidates are
  known), and the client retries with the answers (the SDK's ``Client`` does this by itself). Answers
  ride ``request_state`` from round to round. A refusal there is the client's to report: its SDK
  raises it as the call's error.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ModelHint,
    ModelPreferences,
    SamplingMessage,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from memlane.pipeline.config import LLMConfig
from memlane.pipeline.providers.llm.base import LLMDeferred, LLMError, LLMReply


def client_can_sample(ctx: Context) -> bool:
    caps = ctx.client_capabilities
    return caps is not None and caps.sampling is not None


class SessionSampler:
    """One tool call's sampling provider."""

    name = "sampling"
    model = "client"

    def __init__(self, ctx: Context, cfg: LLMConfig) -> None:
        self._ctx = ctx
        self._cfg = cfg
        self.rounds = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        self.pending: dict[str, CreateMessageRequest] = {}
        self._answers: dict[str, dict[str, str]] = self._recorded() if self.rounds else {}

    def _recorded(self) -> dict[str, dict[str, str]]:
        """Answers of earlier rounds (request_state) and of the last one (input_responses)."""
        answers: dict[str, dict[str, str]] = {}
        try:
            state = json.loads(self._ctx.request_state or "{}")
            if isinstance(state, dict) and isinstance(state.get("sampled"), dict):
                answers.update(
                    {
                        k: v
                        for k, v in state["sampled"].items()
                        if isinstance(v, dict) and isinstance(v.get("text"), str)
                    }
                )
        except ValueError:
            pass  # state from another version: ask again
        for key, response in (self._ctx.input_responses or {}).items():
            if isinstance(response, CreateMessageResult) and isinstance(response.content, TextContent):
                answers[key] = {"text": response.content.text, "model": response.model or "client"}
        return answers

    def state(self) -> str:
        return json.dumps({"sampled": self._answers}, ensure_ascii=False)

    def _preferences(self) -> ModelPreferences:
        cfg = self._cfg
        return ModelPreferences(
            hints=[ModelHint(name=h) for h in cfg.sampling_hints] or None,
            speed_priority=cfg.sampling_speed_priority,
            intelligence_priority=cfg.sampling_intelligence_priority,
            cost_priority=cfg.sampling_cost_priority,
        )

    def _request(self, system: str, user: str) -> CreateMessageRequest:
        return CreateMessageRequest(
            params=CreateMessageRequestParams(
                messages=[SamplingMessage(role="user", content=TextContent(type="text", text=user))],
                system_prompt=system,
                max_tokens=self._cfg.max_output_tokens,
                temperature=0,
                model_preferences=self._preferences(),
            )
        )

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        if self.rounds:
            key = "memlane-" + hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest()[:20]
            answer = self._answers.get(key)
            if answer is None:
                self.pending[key] = self._request(system, user)
                raise LLMDeferred("waiting for the client's model (input required)")
            return LLMReply(text=answer["text"], model=answer.get("model", "client"))
        t0 = time.perf_counter()
        try:
            result = await self._ctx.session.send_request(
                self._request(system, user),
                CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id),
            )
        except MCPError as e:
            raise LLMError(f"the client refused sampling: {e}") from e
        content = result.content
        text = content.text if isinstance(content, TextContent) else ""
        if not text:
            raise LLMError(f"the client's model answered without text ({type(content).__name__})")
        return LLMReply(
            text=text, model=result.model or "client", latency_ms=(time.perf_counter() - t0) * 1000
        )


def sampler_for(ctx: Context | None, llm_service) -> SessionSampler | None:
    """The call's sampling provider when some stage wants one and the client can sample."""
    if ctx is None or llm_service is None or not llm_service.wants_sampling or not client_can_sample(ctx):
        return None
    return SessionSampler(ctx, llm_service.cfg)
