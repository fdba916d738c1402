"""OpenAI chat completions through the ``openai`` SDK; also any OpenAI-compatible server (Ollama,
vLLM, LM Studio, Groq, OpenRouter) given ``llm.base_url``. The SDK retries 429 and 5xx with
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


class OpenAILLM(SDKProvider):
    name = "openai"

    def _make_client(self):
        import openai

        return openai.AsyncOpenAI(
            api_key=self.api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=self.max_retries
        )

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        # OpenAI's own API takes max_completion_tokens (newer models refuse max_tokens); compatible
        # servers mostly know only max_tokens.
        limit = "max_completion_tokens" if self.name == "openai" else "max_tokens"
        t0 = time.perf_counter()
        try:
            resp = await self._sdk().chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=0,
                **{limit: self.max_tokens},
            )
        except Exception as e:
            raise LLMError(describe_sdk_error(e)) from e
        if not resp.choices:
            raise LLMError("the response has no choices")
        usage = {}
        if resp.usage is not None:
            usage = {
                "input_tokens": resp.usage.prompt_tokens or 0,
                "output_tokens": resp.usage.completion_tokens or 0,
            }
        return LLMReply(
            text=resp.choices[0].message.content or "",
            model=resp.model or self.model,
            usage=usage,
            latency_ms=(time.perf_counter() - t0) * 1000,
        )
