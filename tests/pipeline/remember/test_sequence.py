"""Memories remembered one at a time form sequences (``pipeline/remember/write.py sequenced``):
positions and ``next`` links as a batch gets them, from the caller's source or, without one, from
the caller's stream within ``graph.sequence_gap_s``. Real PostgreSQL."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from memlane.pipeline.config import GraphConfig

pytestmark = pytest.mark.anyio


def _next_links(database_url: str) -> set[tuple[str, str]]:
    with psycopg.connect(database_url) as conn:
        return {
            (str(a), str(b)) for a, b in conn.execute("SELECT src, dst FROM memory_links WHERE kind = 'next'")
        }


def _positions(database_url: str, ids) -> list[tuple[str | None, int | None]]:
    with psycopg.connect(database_url) as conn:
        by_id = {
            str(i): (s, p)
            for i, s, p in conn.execute(
                "SELECT id, source, position FROM memories WHERE id = ANY(%s)", ([str(i) for i in ids],)
            )
        }
    return [by_id[str(i)] for i in ids]


async def _say(engine, texts, stream="mcp", **fields):
    return [(await engine.remember({"content": t, **fields}, stream=stream)).id for t in texts]


async def test_one_at_a_time_without_a_source_is_a_sequence_of_the_callers_stream(engine, database_url):
    ids = await _say(engine, ["Ana moved to Porto", "She works at the harbour office", "Her cat is Miso"])
    assert _positions(database_url, ids) == [("mcp", 0), ("mcp", 1), ("mcp", 2)]
    assert _next_links(database_url) == {(str(ids[0]), str(ids[1])), (str(ids[1]), str(ids[2]))}
    # Another project is another sequence; the project's own goes on where it was.
    other = await _say(engine, ["The deploy runs on Fridays"], project="ops")
    more = await _say(engine, ["Ana plays the cello"])
    assert _positions(database_url, other + more) == [("mcp", 0), ("mcp", 3)]
    assert (str(ids[2]), str(more[0])) in _next_links(database_url)


async def test_a_memory_that_happened_days_away_starts_a_new_segment(engine, database_url):
    day1 = await _say(
        engine, ["We chose Postgres", "We chose Redis for the queue"], occurred_at="2024-03-01T10:00:00Z"
    )
    day9 = await _say(
        engine, ["The queue overflowed", "We added a dead-letter queue"], occurred_at="2024-03-09T10:00:00Z"
    )
    assert [p for _, p in _positions(database_url, day1 + day9)] == [0, 1, 3, 4]  # a gap: no link across
    assert _next_links(database_url) == {(str(day1[0]), str(day1[1])), (str(day9[0]), str(day9[1]))}


async def test_a_memory_stored_long_after_the_last_one_starts_a_new_segment(
    open_engine, engine_config, database_url
):
    cfg = engine_config.model_copy(update={"graph": GraphConfig(sequence_gap_s=1.0)})
    eng = await open_engine(cfg)
    first = await _say(eng, ["The user prefers dark mode"])
    await asyncio.sleep(1.3)
    later = await _say(eng, ["The user's editor is Helix"])
    assert [p for _, p in _positions(database_url, first + later)] == [0, 2]
    assert _next_links(database_url) == set()


async def test_a_named_source_is_followed_whenever_its_memories_come(
    open_engine, engine_config, database_url
):
    cfg = engine_config.model_copy(update={"graph": GraphConfig(sequence_gap_s=1.0)})
    eng = await open_engine(cfg)
    a1 = await _say(eng, ["Standup: the release slips a week"], source="chat-a", occurred_at="2024-01-01")
    b1 = await _say(eng, ["Lunch order: two pizzas"], source="chat-b")
    await asyncio.sleep(1.3)
    a2 = await _say(eng, ["Standup: the release is back on track"], source="chat-a", occurred_at="2024-02-01")
    assert _positions(database_url, a1 + b1 + a2) == [("chat-a", 0), ("chat-b", 0), ("chat-a", 1)]
    assert _next_links(database_url) == {(str(a1[0]), str(a2[0]))}


async def test_no_stream_no_sequence_and_gap_zero_switches_it_off(open_engine, engine_config, database_url):
    eng = await open_engine(engine_config)
    plain = [(await eng.remember({"content": t})).id for t in ("alpha fact one", "alpha fact two")]
    assert _positions(database_url, plain) == [(None, None), (None, None)]
    off = await open_engine(engine_config.model_copy(update={"graph": GraphConfig(sequence_gap_s=0)}))
    ids = await _say(off, ["beta fact one", "beta fact two"])
    assert _positions(database_url, ids) == [(None, None), (None, None)]
    assert _next_links(database_url) == set()


async def test_concurrent_remembers_of_one_stream_take_distinct_positions(engine, database_url):
    ids = await asyncio.gather(*(_say(engine, [f"parallel note number {i}"]) for i in range(8)))
    positions = sorted(p for _, p in _positions(database_url, [i for [i] in ids]))
    assert positions == list(range(8))
    assert len(_next_links(database_url)) == 7


async def test_a_duplicate_takes_no_position(engine, database_url):
    first = await _say(engine, ["The wifi password is on the fridge"])
    again = await _say(engine, ["The wifi password is on the fridge"])
    then = await _say(engine, ["The router is in the hall"])
    assert again == first
    assert [p for _, p in _positions(database_url, first + then)] == [0, 1]


async def test_the_remember_tool_sequences_a_clients_memories_and_takes_a_source(connect, database_url):
    from support.clients import call_error, call_ok

    async with connect() as client:
        ids = [
            (await call_ok(client, "remember", {"content": text}))["id"]
            for text in ("Ana moved to Porto", "She works at the harbour office")
        ]
        named = (await call_ok(client, "remember", {"content": "Kickoff notes", "source": "chat-7"}))["id"]
        err = await call_error(client, "remember", {"content": "x y z", "source": 42})
    assert _positions(database_url, [*ids, named]) == [("mcp", 0), ("mcp", 1), ("chat-7", 0)]
    assert _next_links(database_url) == {(ids[0], ids[1])}
    assert "source" in err
