"""The OpenAI (or an OpenAI-compatible) embeddings API (``embedding.provider = "openai"``)."""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding.base import KNOWN_DIMENSIONS, Embedder

if TYPE_CHECKING:
    import openai


class OpenAIEmbedder(Embedder):
    """OpenAI (or OpenAI-compatible) embeddings API."""

    provider = "openai"

    def __init__(
        self,
        model: str,
        dim: int | None,
        batch_size: int,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float = 30.0,
    ) -> None:
        super().__init__()
        self.name = model
        self.dim = dim or KNOWN_DIMENSIONS.get(model) or 0
        if not self.dim:
            raise ConfigError(f"embedding.dimensions must be set for OpenAI model {model!r}")
        self.batch_size = batch_size
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self._client: openai.OpenAI | None = None  # once loaded

    @classmethod
    def from_settings(cls, cfg: EmbeddingConfig, model: str | None) -> OpenAIEmbedder:
        if not model:
            raise ConfigError(
                "embedding.model must be set for embedding.provider 'openai', e.g. text-embedding-3-small"
            )
        key = cfg.api_key.get_secret_value() if cfg.api_key else None
        return cls(model, cfg.dimensions, cfg.batch_size, cfg.base_url, key, cfg.timeout_s)

    def _load(self) -> None:
        if not self.api_key:
            raise ConfigError(
                "embedding.provider 'openai' needs an API key: set MEMLANE_EMBEDDING__API_KEY or OPENAI_API_KEY"
            )
        import openai  # here, not at the top: the SDK takes a second or more to import

        self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url, timeout=self.timeout_s)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self._client is not None  # _embed runs after load()
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i : i + self.batch_size]
            if self.name.startswith("text-embedding-3"):  # the models that take a size
                resp = self._client.embeddings.create(model=self.name, input=chunk, dimensions=self.dim)
            else:
                resp = self._client.embeddings.create(model=self.name, input=chunk)
            for item in sorted(resp.data, key=lambda d: d.index):
                v = list(item.embedding)
                n = math.sqrt(sum(x * x for x in v)) or 1.0
                out.append([x / n for x in v])
        return out
