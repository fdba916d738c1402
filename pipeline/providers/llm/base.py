"""The interface the LLM stages (intent, synthesis, HyDE, rerank) call, and its errors.

An object with this shape is handed to ``Engine(llm=...)`` or built from ``[llm]`` by
``make_provider`` (the registry in ``__init__.py``): the Anthropic and OpenAI SDKs (``anthropic.py``,
``openai.py``, the latter also for any OpenAI-compatible server), or the MCP sampling provider that
``memlane.server`` builds from a session (``pipeline`` never imports ``mcp``). A provider that raises degrades only
the stage that called it (``pipeline/recall/stage.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from memlane.pipeline.errors import MemlaneError

if TYPE_CHECKING:
    from memlane.pipeline.config import LLMConfig


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


Client = TypeVar("Client")  # an SDK's client: anthropic.AsyncAnthropic, openai.AsyncOpenAI


class SDKProvider(Generic[Client]):
    """What the API providers share: settings, and an SDK client made on first use."""

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
        self._client: Client | None = None

    @classmethod
    def from_settings(cls, provider: str, model: str | None, cfg: LLMConfig) -> SDKProvider[Any]:
        """Build from ``[llm]`` settings (``cfg``) for the registered name
        ``provider``; a missing key or model is a ConfigError that says which."""
        raise NotImplementedError  # pragma: no cover - every provider overrides it

    @staticmethod
    def settings(cfg: LLMConfig) -> dict[str, Any]:
        """The ``[llm]`` settings every API provider takes, and the configured key (None if unset)."""
        return {
            "api_key": cfg.api_key.get_secret_value() if cfg.api_key else None,
            "base_url": cfg.base_url,
            "timeout_s": cfg.timeout_s,
            "max_retries": cfg.max_retries,
            "max_tokens": cfg.max_output_tokens,
        }

    def _sdk(self) -> Client:
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> Client:  # pragma: no cover - every provider overrides it
        raise NotImplementedError

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        """``LLM.complete`` through the SDK."""
        raise NotImplementedError  # pragma: no cover - every provider overrides it


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
