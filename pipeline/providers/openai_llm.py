"""OpenAI chat completions through the ``openai`` SDK; also any OpenAI-compatible server (Ollama,
vLLM, LM Studio, Groq, OpenRouter) given ``llm.base_url``. The SDK retries 429 and 5xx with
backoff (``llm.max_retries``)."""

from __future__ import annotations

import time
from typing import Any

from .llm import LLMError, LLMReply, describe_sdk_error


class OpenAILLM:
    def __init__(
        self,
        *,
        name: str,
        model: str,
        api_key: str,
        base_url: str | None,
        timeout_s: float,
        max_retries: int,
        max_tokens: int,
    ) -> None:
        self.name = name
        self.model = model
        self._api_key, self._base_url = api_key, base_url
        self._timeout_s, self._max_retries, self._max_tokens = timeout_s, max_retries, max_tokens
        self._client = None

    def _sdk(self):
        if self._client is None:
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self._base_url,
                timeout=self._timeout_s,
                max_retries=self._max_retries,
            )
        return self._client

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
                **{limit: self._max_tokens},
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
