"""The write path's steps that run side by side: the embedding beside the entities, the neighbour
search beside topics, and a batch's neighbour searches on two connections at once."""

from __future__ import annotations

import asyncio
import threading
from uuid import UUID

import pytest

from memlane.pipeline.errors import EmbeddingFailed, StoreError
from memlane.pipeline.remember import write
from memlane.pipeline.store import vectors

pytestmark = pytest.mark.anyio


async def test_a_batch_is_handed_to_the_model_before_its_entities_are_read(engine, monkeypatch):
    started = threading.Event()
    embed_batch = engine.embedder.embed_batch

    def embedding(texts):
        started.set()
        return embed_batch(texts)

    monkeypatch.setattr(engine.embedder, "embed_batch", embedding)
    link_plan, seen = write.link_plan, []

    def plan(*args, **kwargs):
        # Waits for the model's thread: a plan made before the texts were handed over never sees it.
        seen.append(started.wait(timeout=10))
        return link_plan(*args, **kwargs)

    monkeypatch.setattr(write, "link_plan", plan)
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

    assign_batch = engine.runtime.topics.assign_batch

    async def assign(*args, **kwargs):
        assigning.set()
        return await assign_batch(*args, **kwargs)

    monkeypatch.setattr(engine.store, "nearest_many", search)
    monkeypatch.setattr(engine.runtime.topics, "assign_batch", assign)
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
    inputs = write.parse(engine.config, [{"content": c, "project": "big"} for c in new])
    inputs += write.parse(engine.config, [{"content": "the a service deploys", "project": "small"}])
    vecs = engine.embedder.embed_memories([m.content for m in inputs])
    assert len(new) >= write.NEAREST_SPLIT_MIN

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
    found = await write._nearest(engine.store, inputs, vecs, 4)
    # The indexed project's batch in two halves, the unindexed one's whole; two at a time.
    assert sorted(calls) == [("big", 9), ("big", 9), ("small", 1)]
    assert most[0] == engine.store.parallel_reads == 2
    for m, vec, hits in zip(inputs, vecs, found, strict=True):
        [alone] = await nearest_many(m.project, [vec], 4, ef_search=write.NEIGHBOUR_EF_SEARCH)
        assert hits == alone
        assert len(hits) == (4 if m.project == "big" else 3)


SERVICES = "billing search payments mobile gateway ledger reports inbox".split()


def _batch(project: str) -> list[dict]:
    """14 memories, a repeat and near-duplicates among them."""
    items = [
        {"content": f"Priya moved the {s} deploy to Friday after the {s} incident", "project": project}
        for s in SERVICES
    ]
    items += [
        {"content": f"the {s} team moved its deploy to Friday", "project": project} for s in SERVICES[:5]
    ]
    items.append(dict(items[2]))  # a repeat, stored once
    return items


async def _links(engine, project: str) -> set[tuple[str, str, str]]:
    async with engine.store._connection() as conn:
        cur = await conn.execute(
            "SELECT a.content, b.content, l.kind FROM memory_links l"
            " JOIN memories a ON a.id = l.src JOIN memories b ON b.id = l.dst WHERE a.project = %s",
            (project,),
        )
        return set(await cur.fetchall())


def test_a_batch_s_last_part_is_split_so_little_is_stored_after_the_model():
    for n, sizes in {
        128: [64, 32, 16, 16],
        256: [64, 64, 64, 32, 16, 16],
        200: [64, 64, 64, 8],  # a last part under TAIL_SPLIT_MIN: as it is
        180: [64, 64, 26, 13, 13],
        130: [64, 64, 2],
    }.items():
        order = list(range(n))[::-1]
        parts = write.split_parts(order)
        assert [len(p) for p in parts] == sizes
        assert [i for p in parts for i in p] == order  # every position once, in embedding order


@pytest.mark.parametrize(
    ("part_size", "tail_min", "calls_made"), [(4, 16, [4, 4, 4, 2]), (5, 4, [5, 5, 2, 1, 1])]
)
async def test_a_large_batch_stored_in_parts_is_stored_as_it_would_be_whole(
    engine, monkeypatch, part_size, tail_min, calls_made
):
    for project in ("whole", "parts"):  # something stored already: neighbours to report and link to
        await engine.remember_many(
            [{"content": "Priya moved the billing deploy to Friday", "project": project}]
        )
    relates_to, candidates = write.relates_to, {}

    def spied(inputs, vectors, found, settings):
        out = relates_to(inputs, vectors, found, settings)
        # by content: the rows' ids are random, and so is the direction of a link inside a batch
        candidates[inputs[0].project] = {
            (m.content, t if isinstance(t, UUID) else inputs[t].content, round(w, 3))
            for m, cands in zip(inputs, out, strict=True)
            for t, w in cands
        }
        return out

    monkeypatch.setattr(write, "relates_to", spied)
    whole = await engine.remember_many(_batch("whole"))
    monkeypatch.setattr(write, "PART_SIZE", part_size)
    monkeypatch.setattr(write, "TAIL_SPLIT_MIN", tail_min)
    calls: list[int] = []
    embed_batch = engine.embedder.embed_batch

    def counting(texts):
        calls.append(len(texts))
        return embed_batch(texts)

    monkeypatch.setattr(engine.embedder, "embed_batch", counting)
    parts = await engine.remember_many(_batch("parts"))
    assert calls == calls_made  # embedded a part at a time
    assert [r.status for r in parts] == [r.status for r in whole]
    assert [r.status for r in parts].count("duplicate") == 1
    assert parts[-1].id == parts[2].id
    assert [len(r.similar) for r in parts] == [len(r.similar) for r in whole]
    assert any(r.similar for r in parts)
    # The same relates_to candidates, those of other parts among them (the stored memory's id aside)
    stored_before = {str(t) for _, t, _ in candidates["parts"] if not isinstance(t, str)}
    assert len(stored_before) == 1
    assert {c for c in candidates["parts"] if isinstance(c[1], str)} == {
        c for c in candidates["whole"] if isinstance(c[1], str)
    }
    texts = [it["content"] for it in _batch("parts")]
    part_of: dict[str, int] = {}
    for p, part in enumerate(write.split_parts(sorted(range(len(texts)), key=lambda i: len(texts[i])))):
        for i in part:
            part_of.setdefault(texts[i], p)
    links = await _links(engine, "parts")
    assert any(
        kind == "relates_to" and a in part_of and b in part_of and part_of[a] != part_of[b]
        for a, b, kind in links
    )


async def test_a_part_is_stored_while_the_next_is_embedded(engine, monkeypatch):
    monkeypatch.setattr(write, "PART_SIZE", 4)
    second = threading.Event()
    embed_batch = engine.embedder.embed_batch
    calls: list[int] = []

    def embedding(texts):
        calls.append(len(texts))
        if len(calls) == 2:
            second.set()
        return embed_batch(texts)

    insert_rows, waited = engine.store._insert_rows, []

    async def insert(conn, rows):
        if not waited:  # the first part's INSERT: the second part is with the model by then
            waited.append(await asyncio.to_thread(second.wait, 10))
        return await insert_rows(conn, rows)

    monkeypatch.setattr(engine.embedder, "embed_batch", embedding)
    monkeypatch.setattr(engine.store, "_insert_rows", insert)
    out = await engine.remember_many(_batch("p")[:8])
    assert calls == [4, 4]
    assert waited == [True]
    assert all(r.status == "created" for r in out)


async def test_a_batch_whose_last_part_fails_stores_nothing(engine, monkeypatch):
    monkeypatch.setattr(write, "PART_SIZE", 4)
    embed_batch = engine.embedder.embed_batch
    calls: list[int] = []

    def failing(texts):
        calls.append(len(texts))
        if len(calls) == 3:
            raise RuntimeError("the model ran out of memory")
        return embed_batch(texts)

    monkeypatch.setattr(engine.embedder, "embed_batch", failing)
    with pytest.raises(EmbeddingFailed, match="nothing was stored"):
        await engine.remember_many(_batch("p")[:12])
    assert len(calls) == 3
    async with engine.store._connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM memories WHERE project = 'p'")
        assert (await cur.fetchone())[0] == 0
    monkeypatch.setattr(engine.embedder, "embed_batch", embed_batch)
    out = await engine.remember_many(_batch("p")[:12])  # and the same batch stores afterwards
    assert [r.status for r in out] == ["created"] * 12


async def test_a_batch_whose_second_insert_fails_takes_its_first_part_back(engine, monkeypatch):
    monkeypatch.setattr(write, "PART_SIZE", 4)
    insert_rows, calls = engine.store._insert_rows, []

    async def insert(conn, rows):
        calls.append(len(rows))
        if len(calls) == 2:
            raise StoreError("the disk is full")
        return await insert_rows(conn, rows)

    monkeypatch.setattr(engine.store, "_insert_rows", insert)
    with pytest.raises(StoreError, match="disk is full"):
        await engine.remember_many(_batch("p")[:12])
    assert calls == [4, 4]
    async with engine.store._connection() as conn:
        cur = await conn.execute("SELECT count(*) FROM memories WHERE project = 'p'")
        assert (await cur.fetchone())[0] == 0


@pytest.mark.parametrize("n", [3, 12])  # one INSERT; a batch in parts of 4
async def test_a_batch_not_stored_leaves_no_cached_topics_behind(engine, monkeypatch, n):
    monkeypatch.setattr(write, "PART_SIZE", 4)
    await engine.remember_many(_batch("p")[:2])
    assert "p" in engine.runtime.topics._auto  # the write cached the project's topics

    async def full(conn, rows):
        raise StoreError("the disk is full")

    monkeypatch.setattr(engine.store, "_insert_rows", full)
    with pytest.raises(StoreError, match="disk is full"):
        await engine.remember_many(_batch("p")[2 : 2 + n])
    assert "p" not in engine.runtime.topics._auto
