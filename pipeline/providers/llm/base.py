"""The interface the LLM stages (intent, synthesis, HyDE, rerank) call, and its errors.

An object with this shape is handed to ``Engine(llm=...)`` or built from ``[llm]`` by
``make_provider``: the Anthropic and OpenAI SDKs (``anthropic_llm.py``, ``openai_llm.py``, the
latter also for any OpenAI-compatible server), or the MCP sampling provider that ``memlane.server``
builds from a session (``pipeline`` never imports ``mcp``). A provider that raises degrades only
the stage that called it (``pipeline/recall/stage.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from memlane.pipeline.errors import ConfigError, MemlaneError

DEFAULT_MODELS = {"anthropic": "claude-haiku-4-5", "openai": "gpt-4o-mini"}


@dataclass(frozen=True, slots=True)
class LLMReply:
    text: str
    model: str
    parsed: Any = None  # the JSON value, when a schema was asked for
    usage: dict[str, int] = field(default_factory=dict)  # input_tokens, output_tokens
    latency_ms: float = 0.0


@runtime_checkable
class LLM(Protocol):
    name: str  # provider name, for the trace: "anthropic", "openai", "sampling"...

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        """One exchange: a system and a user message; with ``schema``, JSON matching it is asked for."""
        ...


class LLMError(MemlaneError):
    """The LLM could not give a usable answer; ``reason`` is what the trace shows."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LLMDeferred(LLMError):
    """The answer comes later: MCP sampling on a 2026-07-28 connection asks the client between
    rounds of one tool call, so a stage's first round has no answer yet."""


class SDKProvider:
    """What the API providers share: settings, and an SDK client made on first use (importing an
    SDK costs a second or more, so a server that never calls one never pays it)."""

    name = "api"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None,
        timeout_s: float,
        max_retries: int,
        max_tokens: int,
        name: str | None = None,
    ) -> None:
        self.name = name or self.name
        self.model = model
        self.api_key, self.base_url = api_key, base_url
        self.timeout_s, self.max_retries, self.max_tokens = timeout_s, max_retries, max_tokens
        self._client = None

    def _sdk(self):
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self):  # pragma: no cover - every provider overrides it
        raise NotImplementedError


def describe_sdk_error(e: Exception) -> str:
    """A short reason for the trace from an OpenAI or Anthropic SDK exception (same class names)."""
    kind = type(e).__name__
    status = getattr(e, "status_code", None)
    if kind == "APITimeoutError":
        return "timeout"
    if status is not None:
        return f"HTTP {status}" + (" (rate limited)" if status == 429 else "")
    if kind == "APIConnectionError":
        return "connection failed"
    return f"{kind}: {e}"[:200]


def make_provider(provider: str, model: str | None, cfg) -> LLM:
    """Build an API provider from ``[llm]`` settings (``cfg`` is the LLMConfig). Raises ConfigError
    for a missing key or model, so a broken configuration fails at start-up, not in a recall."""
    key = cfg.api_key.get_secret_value() if cfg.api_key else None
    common = {"timeout_s": cfg.timeout_s, "max_retries": cfg.max_retries, "max_tokens": cfg.max_output_tokens}
    if provider == "anthropic":
        from memlane.pipeline.providers.llm.anthropic import AnthropicLLM

        key = key or os.environ.get("ANTHROPIC_API_KEY")
        if not key:
            raise ConfigError(
                "llm.provider 'anthropic' needs a key: set ANTHROPIC_API_KEY or MEMLANE_LLM__API_KEY"
            )
        return AnthropicLLM(
            model=model or DEFAULT_MODELS["anthropic"], api_key=key, base_url=cfg.base_url, **common
        )
    if provider in ("openai", "openai-compatible"):
        from memlane.pipeline.providers.llm.openai import OpenAILLM

        if provider == "openai":
            key = key or os.environ.get("OPENAI_API_KEY")
            if not key:
                raise ConfigError(
                    "llm.provider 'openai' needs a key: set OPENAI_API_KEY or MEMLANE_LLM__API_KEY"
                )
            model = model or DEFAULT_MODELS["openai"]
        else:
            if not cfg.base_url:
                raise ConfigError(
                    "llm.provider 'openai-compatible' needs llm.base_url, e.g. http://127.0.0.1:11434/v1 (Ollama)"
                )
            if not model:
                raise ConfigError(
                    "llm.provider 'openai-compatible' needs llm.model (the server's model name)"
                )
            key = key or "none"  # local servers take any key; the SDK insists on one
        return OpenAILLM(name=provider, model=model, api_key=key, base_url=cfg.base_url, **common)
    raise ConfigError(f"llm.provider {provider!r} cannot be built here (sampling comes from the MCP session)")
