"""``memlane bench locomo --stored-with PROVIDER``: memories embedded by one provider, questions by
the configured one, as a store an earlier memlane embedded is read after an upgrade. Meaningful
for two providers whose vectors the store treats as one model (``SAME_VECTORS``): MiniLM on torch
(``local``) and on onnxruntime (``onnx``)."""

from __future__ import annotations

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding import make_embedder
from memlane.pipeline.providers.embedding.base import Embedder


class StoredWith(Embedder):
    """Memories (what is stored, and HyDE's hypothetical memory) by ``stored``; queries by
    ``asked``. It is ``asked`` to the store (its model id), so a store of ``stored`` must count as
    the same model."""

    asymmetric = True  # the two sides go to two models, never one batch

    def __init__(self, stored: Embedder, asked: Embedder) -> None:
        super().__init__()
        if stored.model_id not in asked.vector_ids:
            raise ConfigError(
                f"--stored-with: {stored.model_id} and {asked.model_id} are different models to the store; "
                "mixing their vectors measures nothing"
            )
        self.stored, self.asked = stored, asked
        self.provider, self.name, self.dim = asked.provider, asked.name, asked.dim
        # Not every Embedder has one; the pipeline's timeout reads it the same way.
        self.batch_size: int = getattr(asked, "batch_size", 64)

    def _load(self) -> None:
        self.stored.load()
        self.asked.load()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return self.stored.embed_memories(texts)

    def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self.asked.embed_queries(texts)

    def describe(self) -> str:
        return f"memories embedded by {self.stored.model_id}, questions by {self.asked.model_id}"


def stored_with(provider: str, cfg: EmbeddingConfig) -> StoredWith:
    return StoredWith(make_embedder(EmbeddingConfig(provider=provider)), make_embedder(cfg))
