"""Anthropic's Messages API through the ``anthropic`` SDK, which retries 429, 529 and 5xx with
backoff (``llm.max_retries``)."""

from __future__ import annotations

import time
from typing import Any

from .llm import LLMError, LLMReply, describe_sdk_error


class AnthropicLLM:
    name = "anthropic"

    def __init__(
        self,
        *,
        model: str,
        api_key: str,
        base_url: str | None,
        timeout_s: float,
        max_retries: int,
        max_tokens: int,
    ) -> None:
        self.model = model
        self._api_key, self._base_url = api_key, base_url
        self._timeout_s, self._max_retries, self._max_tokens = timeout_s, max_retries, max_tokens
        self._client = None

    def _sdk(self):
        if self._client is None:
            import anthropic

            self._client = anthropic.AsyncAnthropic(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=self._max_retries,
            )
        return self._client

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        t0 = time.perf_counter()
        try:
            resp = await self._sdk().messages.create(
                model=self.model,
                max_tokens=self._max_tokens,
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
