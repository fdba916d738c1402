"""The write path's steps that run side by side: the embedding beside the entities, the neighbour
search beside topics, and a batch's neighbour searches on two connections at once."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memlane.pipeline.remember import pipeline
from memlane.pipeline.store import vectors

pytestmark = pytest.mark.anyio


async def test_a_batch_is_handed_to_the_model_before_its_entities_are_read(engine, monkeypatch):
    started = threading.Event()
    embed_batch = engine.embedder.embed_batch

    def embedding(texts):
        started.set()
        return embed_batch(texts)

    monkeypatch.setattr(engine.embedder, "embed_batch", embedding)
    link_plan, seen = pipeline.link_plan, []

    def plan(*args, **kwargs):
        # Waits for the model's thread: a plan made before the texts were handed over never sees it.
        seen.append(started.wait(timeout=10))
        return link_plan(*args, **kwargs)

    monkeypatch.setattr(pipeline, "link_plan", plan)
    out = await engine.remember_many([{"content": "Priya moved the billing deploy to Friday"}])
    assert seen == [True]
    assert out[0].status == "created"


async def test_topics_are_assigned_while_the_neighbour_search_runs(engine, monkeypatch):
    await engine.remember({"content": "the billing service deploys on Fridays", "project": "p"})
    assigning = asyncio.Event()
    nearest_many = engine.store.nearest_many

    async def search(*args, **kwargs):
        # Returns only once topics are being assigned: run one after the other, this would time out.
        await asyncio.wait_for(assigning.wait(), timeout=10)
        return await nearest_many(*args, **kwargs)

    assign_batch = engine.topics.assign_batch

    async def assign(*args, **kwargs):
        assigning.set()
        return await assign_batch(*args, **kwargs)

    monkeypatch.setattr(engine.store, "nearest_many", search)
    monkeypatch.setattr(engine.topics, "assign_batch", assign)
    [out] = await engine.remember_many([{"content": "billing deploys moved to Thursdays", "project": "p"}])
    assert out.status == "created"


async def test_a_batchs_searches_run_two_at_a_time_with_the_answers_of_one_each(engine, monkeypatch):
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 5)
    stored = [f"note {i}: the {w} service changed its deploy window" for i, w in enumerate("abcdefghij")]
    await engine.remember_many([{"content": c, "project": "big"} for c in stored])
    await engine.remember_many([{"content": c, "project": "small"} for c in stored[:3]])
    await engine.store.index_projects({"big": 0, "small": 0})
    assert engine.store.known_indexed("big") and not engine.store.known_indexed("small")

    new = [
        f"a question about the {w} service's deploy window, number {i}"
        for i, w in enumerate("klmnopqrstuvwxyzab")
    ]
    inputs = pipeline.parse(engine.config, [{"content": c, "project": "big"} for c in new])
    inputs += pipeline.parse(engine.config, [{"content": "the a service deploys", "project": "small"}])
    vecs = engine.embedder.embed_passages([m.content for m in inputs])
    assert len(new) >= pipeline.NEAREST_SPLIT_MIN

    nearest_many, calls, running, most = engine.store.nearest_many, [], [0], [0]

    async def counted(project, embeddings, k, **kwargs):
        calls.append((project, len(embeddings)))
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            await asyncio.sleep(0.05)  # long enough for the next search to start, if it may
            return await nearest_many(project, embeddings, k, **kwargs)
        finally:
            running[0] -= 1

    monkeypatch.setattr(engine.store, "nearest_many", counted)
    found = await pipeline._nearest(engine.store, inputs, vecs, 4)
    # The indexed project's batch in two halves, the unindexed one's whole; two at a time.
    assert sorted(calls) == [("big", 9), ("big", 9), ("small", 1)]
    assert most[0] == pipeline.NEAREST_PARALLEL == 2
    for m, vec, hits in zip(inputs, vecs, found, strict=True):
        [alone] = await nearest_many(m.project, [vec], 4, ef_search=pipeline.NEIGHBOUR_EF_SEARCH)
        assert hits == alone
        assert len(hits) == (4 if m.project == "big" else 3)
