"""Short handles: recall shows the shortest unique start of an id (8+ hex digits); update and
forget take any unique start and refuse an ambiguous one, listing the candidates."""

from __future__ import annotations

import uuid
from contextlib import asynccontextmanager

import pytest
from support.clients import in_process

from memlane.pipeline import validate
from memlane.pipeline.config import DatabaseConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput, NotFound
from memlane.pipeline.recall import render
from memlane.pipeline.request import Filters
from memlane.pipeline.tokens import count_tokens
from memlane.server.settings import load

pytestmark = pytest.mark.anyio

TWIN_A = uuid.UUID("abcd1234-0000-4000-8000-000000000001")
TWIN_B = uuid.UUID("abcd1234-0000-4000-8000-000000000002")
LONER = uuid.UUID("5eed5eed-1111-4111-8111-111111111111")


async def seed(engine: Engine) -> None:
    """Three memories whose ids are set by hand: two share 31 of their 32 hex digits."""
    contents = {
        TWIN_A: "The billing service stores invoices in PostgreSQL",
        TWIN_B: "The billing service sends invoices on the first of the month",
        LONER: "Deploys to production happen on Tuesdays after the standup",
    }
    for mid, text in contents.items():
        out = await engine.remember({"content": text})
        async with engine.store.pool.connection() as conn:
            await conn.execute("UPDATE memories SET id = %s WHERE id = %s", (mid, out.id))


def test_prefixes_parse_with_or_without_hyphens_and_need_8_hex_digits():
    assert validate.parse_id_prefix("ABCD1234") == "abcd1234"
    assert validate.parse_id_prefix("abcd1234-00") == "abcd123400"
    assert validate.parse_id_prefix(str(TWIN_A)) == TWIN_A
    assert validate.parse_id_prefix(TWIN_A.hex) == TWIN_A
    assert validate.parse_id_prefix(TWIN_A.urn) == TWIN_A
    for bad in ("abcd123", "not-a-uuid", "abcd123g", ""):
        with pytest.raises(InvalidInput, match="at least its first 8 hex digits"):
            validate.parse_id_prefix(bad)


async def test_handles_grow_until_they_are_unique_in_the_store(engine):
    await seed(engine)
    handles = await engine.store.handles([TWIN_A, TWIN_B, LONER])
    assert handles[LONER] == "5eed5eed"
    # The twins differ only in the last digit, so only the full id tells them apart.
    assert handles[TWIN_A] == str(TWIN_A) and handles[TWIN_B] == str(TWIN_B)


async def test_a_unique_prefix_resolves_and_an_ambiguous_one_lists_the_candidates(engine):
    await seed(engine)
    assert await engine.store.resolve_id("5eed5eed") == LONER
    with pytest.raises(InvalidInput) as err:
        await engine.store.resolve_id("abcd1234")
    msg = str(err.value)
    assert "ambiguous" in msg and str(TWIN_A) in msg and str(TWIN_B) in msg and "invoices" in msg
    with pytest.raises(NotFound, match="no memory id starts with 'ffffffff'"):
        await engine.store.resolve_id("ffffffff")
    # A longer prefix that only one of them starts with is no longer ambiguous.
    assert await engine.store.resolve_id(str(TWIN_B)[:-1] + "2") == TWIN_B
    # update, get and forget take prefixes too.
    updated = await engine.update("5eed5eed", {"tags": ["deploy"]})
    assert updated.id == LONER and updated.tags == ("deploy",)
    assert (await engine.get("5EED5EED-11")).id == LONER
    assert (await engine.forget("5eed5eed")).id == LONER
    with pytest.raises(NotFound):
        await engine.forget("5eed5eed")


@pytest.fixture
def connect(database_url, tmp_path, embedder):
    @asynccontextmanager
    async def _connect():
        settings = load(None, data_dir=tmp_path, database=DatabaseConfig(url=database_url))
        engine = Engine(settings.engine(), embedder=embedder)
        async with in_process(settings, engine=engine) as client:
            yield client, engine

    return _connect


async def test_over_mcp_recall_shows_handles_that_update_and_forget_accept(connect):
    async with connect() as (client, engine):
        await client.call_tool("recall", {"query": "warm up"})  # opens the engine
        await seed(engine)
        r = await client.call_tool("recall", {"query": "when do we deploy to production?", "limit": 1})
        [m] = r.structured_content["memories"]
        assert m["id"] == "5eed5eed"
        full = await client.call_tool("recall", {"query": "when do we deploy?", "limit": 1, "explain": True})
        assert full.structured_content["memories"][0]["id"] == str(LONER)

        up = await client.call_tool("update", {"id": m["id"], "priority": 5})
        assert up.is_error is False and up.structured_content["id"] == str(LONER)

        amb = await client.call_tool("forget", {"id": "abcd1234"})
        assert amb.is_error is True
        assert "ambiguous" in amb.content[0].text and str(TWIN_A) in amb.content[0].text

        gone = await client.call_tool("forget", {"id": m["id"]})
        assert gone.is_error is False and gone.structured_content["id"] == str(LONER)


async def test_a_longer_handle_is_shown_and_counted_in_the_budget(connect):
    async with connect() as (client, engine):
        await client.call_tool("recall", {"query": "warm up"})
        await seed(engine)
        r = await client.call_tool("recall", {"query": "billing service invoices", "limit": 2})
        data = r.structured_content
        # The twins share 31 hex digits: only their full ids are unique, and the budget counts them.
        assert sorted(m["id"] for m in data["memories"]) == [str(TWIN_A), str(TWIN_B)]
        assert count_tokens(render.to_text(data)) == data["tokens_used"]


async def test_recall_reads_handles_only_where_8_digits_are_not_unique(engine, monkeypatch):
    """Retrieval reads with each candidate's row whether another id starts with its 8 hex digits.
    The handles of the best candidates after the relevance threshold that do share them are read
    ahead, in one statement, while stage 8 runs; the others' handles are their 8 digits, unread."""
    await seed(engine)
    reads: list[list[uuid.UUID]] = []
    real = engine.store.handles

    async def counted(ids):
        reads.append(list(ids))
        return await real(ids)

    monkeypatch.setattr(engine.store, "handles", counted)
    res = await engine.recall(dict(query="where are invoices stored?", limit=2, count_accesses=False))
    assert len(reads) == 1 and set(reads[0]) <= {TWIN_A, TWIN_B}
    assert {m.id for m, _ in res.memories} <= set(reads[0])
    shown = {m["id"] for m in res.rendered["memories"]}
    assert str(TWIN_A) in shown  # the twins' handles are whole ids, as read from the store
    reads.clear()
    res = await engine.recall(
        dict(query="when do deploys to production happen?", limit=1, count_accesses=False)
    )
    assert [m.id for m, _ in res.memories] == [LONER] and reads == []
    assert [m["id"] for m in res.rendered["memories"]] == [render.handle_of(LONER, 8)]

    from memlane.pipeline.recall.assemble import HandlesReadAhead

    ahead = HandlesReadAhead(counted, [TWIN_A])
    found = await ahead([TWIN_A, LONER])
    assert found == {TWIN_A: render.handle_of(TWIN_A, 32), LONER: render.handle_of(LONER, 8)}
    assert reads == [[TWIN_A], [LONER]]  # ahead, then only the one it had not read
    ahead.cancel()
    reads.clear()
    ahead = HandlesReadAhead(counted, [TWIN_A, LONER], {LONER})
    assert await ahead([LONER, TWIN_A]) == found
    assert reads == [[TWIN_A]]  # a handle known unique is never read
    ahead.cancel()


async def test_search_reads_which_8_digit_handles_are_unique(engine):
    await seed(engine)
    ids = [TWIN_A, TWIN_B, LONER]
    hits = await engine.store.search(
        filters=Filters(projects=("default",)),
        text="invoices",
        embedding=None,
        k=3,
        arms=("keyword",),
        preselected={"keyword": ids},
    )
    assert {h.memory.id: h.handle8_unique for h in hits} == {TWIN_A: False, TWIN_B: False, LONER: True}
