"""Anthropic's Messages API through the ``anthropic`` SDK, which retries 429, 529 and 5xx with
backoff (``llm.max_retries``)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.llm.base import (
    LLMError,
    LLMReply,
    SDKProvider,
    describe_sdk_error,
)

if TYPE_CHECKING:
    import anthropic

    from memlane.pipeline.config import LLMConfig

DEFAULT_MODEL = "claude-haiku-4-5"


class AnthropicLLM(SDKProvider["anthropic.AsyncAnthropic"]):
    name = "anthropic"

    @classmethod
    def from_settings(cls, provider: str, model: str | None, cfg: LLMConfig) -> AnthropicLLM:
        settings = cls.settings(cfg)
        settings["api_key"] = settings["api_key"] or os.environ.get("ANTHROPIC_API_KEY")
        if not settings["api_key"]:
            raise ConfigError(
                "llm.provider 'anthropic' needs a key: set ANTHROPIC_API_KEY or MEMLANE_LLM__API_KEY"
            )
        return cls(model=model or DEFAULT_MODEL, **settings)

    def _make_client(self) -> anthropic.AsyncAnthropic:
        import anthropic  # here, not at the top: the SDK takes a second or more to import

        return anthropic.AsyncAnthropic(
            api_key=self.api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=self.max_retries
        )

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        t0 = time.perf_counter()
        try:
            resp = await self._sdk().messages.create(
                model=self.model,
                max_tokens=self.max_tokens,
                system=system,
                messages=[{"role": "user", "content": user}],
            )
        except Exception as e:
            raise LLMError(describe_sdk_error(e)) from e
        text = "".join(getattr(block, "text", "") for block in resp.content if block.type == "text")
        usage = {"input_tokens": resp.usage.input_tokens, "output_tokens": resp.usage.output_tokens}
        return LLMReply(
            text=text,
            model=resp.model or self.model,
            usage=usage,
            latency_ms=(time.perf_counter() - t0) * 1000,
        )
