"""Anthropic's Messages API through the ``anthropic`` SDK, which retries 429, 529 and 5xx with
backoff (``llm.max_retries``)."""

from __future__ import annotations

import time
from typing import Any

from memlane.pipeline.providers.llm.base import (
    LLMError,
    LLMReply,
    SDKProvider,
    describe_sdk_error,
)


class AnthropicLLM(SDKProvider):
    name = "anthropic"

    def _make_client(self):
        import anthropic

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
