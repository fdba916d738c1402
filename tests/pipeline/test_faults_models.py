"""Faults in the models, injected in process against a real database: an embedder that raises or
hangs, an LLM provider that is down. Recall degrades as designed (the keyword arm answers when the
embedder fails; an LLM stage that cannot reach its provider is marked degraded); remember and
update store fully or fail cleanly with a clear error, never half."""

from __future__ import annotations

import threading
import time

import pytest
from support.clients import in_process
from support.dump import dump
from support.processes import free_port

from memlane.pipeline.config import (
    DatabaseConfig,
    EmbeddingConfig,
    LLMConfig,
    RecallConfig,
)
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.providers.embedding.base import Embedder
from memlane.pipeline.recall.query import RecallQuery
from memlane.server.settings import Settings

pytestmark = pytest.mark.anyio

# embedding.embed_timeout_s while the model hangs, and while it is healthy.
HANG_LIMIT = 1.0
HEALTHY_LIMIT = 120.0
SLACK = 20.0  # scheduling on a loaded 2-core machine; a hang without the limit lasts 60 s
FACTS = [
    "The billing service is written in Go",
    "Dana owns the billing service",
    "The staging cluster is called Juniper",
]
# A store of a realistic spread, so the keyword arm's rare-word query has words to work with.
FILLER = [f"Weekly sync {i}: the team reviewed ticket number {i}" for i in range(30)]


class FaultyEmbedder(Embedder):
    """The real model, until told to raise or to hang (until released)."""

    def __init__(self, real: Embedder) -> None:
        super().__init__()
        self.real = real
        self.name, self.dim, self.provider = real.name, real.dim, real.provider
        self.batch_size = getattr(real, "batch_size", 64)
        self.mode = "ok"
        self.release = threading.Event()

    def _load(self) -> None:
        self.real.load()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self.mode == "raise":
            raise RuntimeError("CUDA error: device-side assert triggered")
        if self.mode == "hang":
            self.release.wait(60)
        return self.real.embed_batch(texts)


@pytest.fixture
async def faulty(database_url, tmp_path, embedder):
    emb = FaultyEmbedder(embedder)
    cfg = Settings(
        data_dir=tmp_path,
        database=DatabaseConfig(url=database_url),
        embedding=EmbeddingConfig(embed_timeout_s=HANG_LIMIT),
        # The keyword arm alone is what answers while the model is down; the graph arm would push the
        # best keyword hit's activation on to its neighbour in this tiny store.
        recall=RecallConfig(graph="off"),
    )
    eng = Engine(cfg.engine(), embedder=emb)
    await eng.open()
    # The limit is set only while the model misbehaves: on a loaded machine a healthy embedding can
    # take longer than a limit short enough to test.
    eng.config.embedding.embed_timeout_s = HEALTHY_LIMIT
    await eng.remember_many([{"content": f, "project": "p"} for f in FACTS + FILLER])
    yield eng, emb, cfg
    emb.release.set()
    await eng.close()


async def recall(eng: Engine, query: str):
    res = await eng.recall(dict(query=query, project="p", count_accesses=False))
    return [m.content for m, _ in res.memories], {s.stage: s.status for s in res.trace.stages}


@pytest.mark.parametrize("mode", ["raise", "hang"])
async def test_a_failing_embedder_stores_nothing_and_recall_answers_from_keywords(faulty, database_url, mode):
    eng, emb, _ = faulty
    seed_id = (await eng.remember({"content": "Priya reviews every migration", "project": "p"})).id
    before = dump(database_url)
    emb.mode = mode
    eng.config.embedding.embed_timeout_s = HANG_LIMIT

    t0 = time.monotonic()
    with pytest.raises(EmbeddingFailed, match="nothing was stored") as e:
        await eng.remember_many([{"content": "Eve joined the data team", "project": "p"}] * 1)
    took = time.monotonic() - t0
    assert (f"did not answer within {HANG_LIMIT:g} s" if mode == "hang" else "CUDA error") in str(e.value)
    assert took < HANG_LIMIT + SLACK, f"remember took {took:.1f} s to fail"
    with pytest.raises(EmbeddingFailed, match="not changed"):
        await eng.update(str(seed_id), {"content": "Priya no longer reviews migrations"})
    assert dump(database_url) == before, "a failed remember or update changed the store"

    t0 = time.monotonic()
    found, stages = await recall(eng, "which language is the billing service written in?")
    assert time.monotonic() - t0 < HANG_LIMIT + SLACK
    assert found and found[0] == "The billing service is written in Go"
    assert (
        stages["retrieval"].startswith("degraded: the embedding model")
        and "keyword only" in stages["retrieval"]
    )

    emb.mode = "ok"  # the model recovers: everything works again, nothing was half-written meanwhile
    emb.release.set()
    eng.config.embedding.embed_timeout_s = HEALTHY_LIMIT
    out = await eng.remember({"content": "Eve joined the data team", "project": "p"})
    assert out.status == "created"
    found, stages = await recall(eng, "who joined the data team?")
    assert found[0] == "Eve joined the data team" and stages["retrieval"] == "ran"


async def test_over_mcp_a_failing_embedder_is_a_clear_tool_error_and_the_server_keeps_working(
    faulty, database_url
):
    eng, emb, cfg = faulty
    async with in_process(cfg, engine=eng) as client:
        before = dump(database_url)
        emb.mode = "raise"
        r = await client.call_tool("remember", {"content": "Frank leads the data team", "project": "p"})
        assert r.is_error and "the embedding model failed" in r.content[0].text
        assert "nothing was stored" in r.content[0].text and "unexpectedly" not in r.content[0].text
        assert dump(database_url) == before
        r = await client.call_tool("recall", {"query": "who owns the billing service?", "project": "p"})
        assert (
            not r.is_error
            and r.structured_content["memories"][0]["content"] == "Dana owns the billing service"
        )
        emb.mode = "ok"
        r = await client.call_tool("remember", {"content": "Frank leads the data team", "project": "p"})
        assert not r.is_error and r.structured_content["status"] == "created"


async def test_an_llm_provider_that_is_down_degrades_its_stages_and_recall_and_remember_still_work(
    engine_config, embedder
):
    """Nothing listens on the provider's port (connection refused): every LLM stage is marked
    degraded, the recall still answers, and remember never needed the LLM."""
    llm = LLMConfig(
        provider="openai-compatible",
        base_url=f"http://127.0.0.1:{free_port()}/v1",
        model="any",
        timeout_s=2,
        max_retries=0,
    )
    eng = Engine(engine_config.model_copy(update={"llm": llm}), embedder=embedder)
    await eng.open()
    try:
        out = await eng.remember_many([{"content": f, "project": "p"} for f in FACTS])
        assert [o.status for o in out] == ["created"] * 3
        req = RecallQuery.parse(
            eng.config,
            dict(query="which cluster is used for staging and who owns billing?", project="p", mode="full"),
        )
        t0 = time.monotonic()
        res = await eng.recall(req.model_copy(update={"count_accesses": False}))
        took = time.monotonic() - t0
        stages = {s.stage: s.status for s in res.trace.stages}
        degraded = [s for s in ("intent", "synthesis", "hyde", "rerank") if stages[s].startswith("degraded")]
        assert degraded, stages
        assert all(stages[s] == "ran" for s in ("retrieval", "fusion", "assembly")), stages
        assert {m.content for m, _ in res.memories} >= {"The staging cluster is called Juniper"}
        assert took < 15, f"a down provider held the recall for {took:.1f} s"
    finally:
        await eng.close()
