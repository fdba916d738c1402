"""What every embedder is: the ``Embedder`` interface (asymmetric encoding, ``embed_queries``
for what recall asks with and ``embed_memories`` for what is stored: memories, and HyDE's
hypothetical memory), ``unit_rows``, and the one cosine scale every model is read on.

Scores on one scale. The recall thresholds (``recall.semantic_min_similarity`` and friends) and score
fusion read cosine on all-MiniLM-L6-v2's scale, where unrelated text scores about
``REFERENCE_UNRELATED``. A model whose cosines sit elsewhere (multilingual-e5-small) declares its own
``unrelated_cosine`` and ``calibrate`` maps its cosines linearly onto the reference scale
(unrelated -> REFERENCE_UNRELATED, identical -> 1), so the floor and fusion keep working with
every model.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from memlane.pipeline import telemetry

if TYPE_CHECKING:
    from memlane.pipeline.config import EmbeddingConfig

MINILM_MODEL = "all-MiniLM-L6-v2"  # the default model, on onnxruntime ("onnx") or torch ("local")

# Dimensions of models whose size we know without loading them, so the store can be checked
# against the configured model at start-up without waiting for the weights.
KNOWN_DIMENSIONS = {
    "all-MiniLM-L6-v2": 384,
    "multilingual-e5-small": 384,
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}


# Model ids whose vectors are one model's, so a store embedded by one is read and extended by the
# other without `memlane reembed`: MiniLM's int8 ONNX export against its torch weights, cosine
# 0.9995 on average over 600 LoCoMo turns, and recall from a store embedded by torch and queried by
# ONNX equal to ONNX alone (docs/configuration.md#minilm-without-torch has the measurement).
SAME_VECTORS = (frozenset({f"onnx:{MINILM_MODEL}", f"local:{MINILM_MODEL}"}),)


# The cosine of unrelated (question, memory) pairs on the reference scale (all-MiniLM-L6-v2), measured
# as the median cosine of the questions of bench/unrelated.txt against 600 LoCoMo turns
# (-0.011) and 600 memories of the latency benchmark's corpus (0.027).
REFERENCE_UNRELATED = 0.01


def unit_rows(vectors: npt.ArrayLike) -> np.ndarray:
    """The rows of ``vectors`` scaled to unit length (float32); an all-zero row stays zero."""
    mat = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return mat / np.where(norms > 0, norms, 1.0)


class Embedder(ABC):
    """Turns texts into unit-length vectors. Thread-safe after ``load``."""

    name: str
    dim: int
    # This model's typical cosine between an unrelated query and memory; None: the model is on the
    # reference scale already (no calibration).
    unrelated_cosine: float | None = None
    # True when queries and memories are encoded differently (``_embed_queries`` overridden).
    asymmetric: bool = False
    # How the model was chosen ("configured", "auto", ...) and, when auto fell back, why.
    chosen: str = "configured"
    fallback: str | None = None
    # The most tokens the model reads of one text, its special tokens left out (None: unknown; a
    # model may learn it when it loads).
    window: int | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False

    @classmethod
    def from_settings(cls, cfg: EmbeddingConfig, model: str | None) -> Embedder:
        """Built from ``[embedding]`` (``cfg``) with ``model`` (None: this
        provider's default); a setting it cannot work with is a ConfigError that names it."""
        raise NotImplementedError  # pragma: no cover - every embedder overrides it

    @property
    def model_id(self) -> str:
        """What the store records: provider and model, so mixing vectors is detectable."""
        return f"{self.provider}:{self.name}"

    provider: str = "base"

    @property
    def vector_ids(self) -> frozenset[str]:
        """The recorded model ids whose vectors this model's match: its own and ``SAME_VECTORS``."""
        for ids in SAME_VECTORS:
            if self.model_id in ids:
                return ids
        return frozenset({self.model_id})

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

    def token_offsets(self, text: str) -> list[tuple[int, int]] | None:
        """The character span of each of ``text``'s tokens as this model reads them, without
        truncation; None: the model does not say (its window is not known to cut a memory short)."""
        return None

    def passages(self, text: str) -> list[str]:
        """The parts of a text longer than the model's window, to be embedded beside the text's own
        vector (which reads its first window only): each half a window long, each starting three
        quarters of a part after the one before it (the first that far into the text), so a
        sentence cut at one part's end is whole in the next; the last ends at the text's end. Half
        a window: a fact of one or two sentences weighs twice as much in its part's vector as in a
        whole window's. Empty for a text within the window."""
        self.load()  # some models know their window once loaded
        if self.window is None:
            return []
        offsets = self.token_offsets(text)
        if not offsets or len(offsets) <= self.window:
            return []
        n, size = len(offsets), max(1, self.window // 2)
        step = max(1, size * 3 // 4)
        out: list[str] = []
        start = step
        while True:
            end = min(start + size, n)
            out.append(text[offsets[start][0] : offsets[end - 1][1]])
            if end >= n:
                return out
            start += step

    def embed_memories(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts to be stored and searched (memories)."""
        self.load()
        if not texts:
            return []
        if not telemetry.observing():
            return self._embed(texts)
        t0 = time.perf_counter()
        out = self._embed(texts)
        # "passages": the metrics' name for this side (memlane_embedded_texts_total{kind}), kept
        # for the dashboards that read it; it is not a long memory's part.
        telemetry.embedded("passages", len(texts), time.perf_counter() - t0)
        return out

    def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts that search the stored ones (recall questions and their variants)."""
        self.load()
        if not texts:
            return []
        if not telemetry.observing():
            return self._embed_queries(texts)
        t0 = time.perf_counter()
        out = self._embed_queries(texts)
        telemetry.embedded("queries", len(texts), time.perf_counter() - t0)
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.embed_queries([text])[0]

    # Kept for callers written before the query/memory split: a batch of memories.
    def embed_batch(self, texts: list[str]) -> list[list[float]]:
        return self.embed_memories(texts)

    def embed(self, text: str) -> list[float]:
        return self.embed_memories([text])[0]

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
    def calibration(self) -> dict[str, float] | None:
        """What ``calibrate`` does, for traces and stats (None: nothing)."""
        if self.unrelated_cosine is None:
            return None
        return {"unrelated": self.unrelated_cosine, "to": REFERENCE_UNRELATED, "identical": 1.0}

    @abstractmethod
    def _embed(self, texts: list[str]) -> list[list[float]]:
        """Memories (and, for a symmetric model, queries too)."""

    def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts)


class Scored(Protocol):
    """A search hit, as ``calibrated`` reads it: its score on each arm."""

    @property
    def scores(self) -> dict[str, float]: ...


_Hit = TypeVar("_Hit", bound=Scored)


def calibrated(embedder: Embedder, hits: list[_Hit], arms: list[str]) -> list[_Hit]:
    """Cosine scores on the reference scale the fusion and the floor read (``Embedder.calibrate``:
    a no-op for MiniLM)."""
    if embedder.calibration is None:
        return hits
    for h in hits:
        for arm in arms:
            if arm in h.scores:
                h.scores[arm] = embedder.calibrate(h.scores[arm])
    return hits
