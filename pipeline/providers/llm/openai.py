"""OpenAI chat completions through the ``openai`` SDK; also any OpenAI-compatible server (Ollama,
vLLM, LM Studio, Groq, OpenRouter) given ``llm.base_url``. The SDK retries 429 and 5xx with
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
    import openai

    from memlane.pipeline.config import LLMConfig

DEFAULT_MODEL = "gpt-4o-mini"


class OpenAILLM(SDKProvider["openai.AsyncOpenAI"]):
    name = "openai"  # or "openai-compatible": any server speaking the API, given llm.base_url

    @classmethod
    def from_settings(cls, provider: str, model: str | None, cfg: LLMConfig) -> OpenAILLM:
        settings = cls.settings(cfg)
        if provider == "openai":
            settings["api_key"] = settings["api_key"] or os.environ.get("OPENAI_API_KEY")
            if not settings["api_key"]:
                raise ConfigError(
                    "llm.provider 'openai' needs a key: set OPENAI_API_KEY or MEMLANE_LLM__API_KEY"
                )
            model = model or DEFAULT_MODEL
        else:
            if not cfg.base_url:
                raise ConfigError(
                    f"llm.provider {provider!r} needs llm.base_url, e.g. http://127.0.0.1:11434/v1 (Ollama)"
                )
            if not model:
                raise ConfigError(f"llm.provider {provider!r} needs llm.model (the server's model name)")
            settings["api_key"] = (
                settings["api_key"] or "none"
            )  # local servers take any key; the SDK insists on one
        return cls(name=provider, model=model, **settings)

    def _make_client(self) -> openai.AsyncOpenAI:
        import openai  # here, not at the top: the SDK takes a second or more to import

        return openai.AsyncOpenAI(
            api_key=self.api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=self.max_retries
        )

    async def complete(self, *, system: str, user: str, schema: dict[str, Any] | None = None) -> LLMReply:
        # OpenAI's own API takes max_completion_tokens (newer models refuse max_tokens); compatible
        # servers mostly know only max_tokens.
        limit = "max_completion_tokens" if self.name == "openai" else "max_tokens"
        t0 = time.perf_counter()
        try:
            # (call-overload: the limit's keyword is chosen at run time, which mypy cannot match to
            # the SDK's overloads on ``stream``; both keywords take an int.)
            resp = await self._sdk().chat.completions.create(  # type: ignore[call-overload]
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
