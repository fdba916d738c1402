"""LLM providers: the interface (``base``), one module per API (``anthropic``, ``openai``) and the
registry ``make_provider`` builds from. The MCP sampling provider is not here: it needs the MCP
session, so ``memlane.server`` builds it and hands it to the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.llm.anthropic import AnthropicLLM
from memlane.pipeline.providers.llm.base import LLM, SDKProvider
from memlane.pipeline.providers.llm.openai import OpenAILLM

if TYPE_CHECKING:
    from memlane.pipeline.config import LLMConfig

PROVIDERS: dict[str, type[SDKProvider[Any]]] = {
    "anthropic": AnthropicLLM,
    "openai": OpenAILLM,
    "openai-compatible": OpenAILLM,
}


def make_provider(provider: str, model: str | None, cfg: LLMConfig) -> LLM:
    """Build an API provider from ``[llm]`` settings (``cfg``). Raises ConfigError
    for a missing key or model, so a broken configuration fails at start-up, not in a recall."""
    built = PROVIDERS.get(provider)
    if built is None:
        raise ConfigError(
            f"llm.provider {provider!r} cannot be built here (sampling comes from the MCP session)"
        )
    return built.from_settings(provider, model, cfg)
