"""A new statement that replaces one fact of a memory of several (detect.statements, detect.covers):
the memory stays current, so what else it says still answers, while recall puts the newer statement
first for the question about the part it replaced. Through a real MCP client, remember then recall."""

from __future__ import annotations

import pytest
from support.clients import call_ok

pytestmark = pytest.mark.anyio

CACHE = "Tidepool switched its cache to sled"


@pytest.mark.parametrize(
    "several",
    [
        "Tidepool uses Redis for its cache and targets v0.3 in March",
        "Tidepool uses Redis as its cache. It targets v0.3 in March.",
        "Tidepool: cache is Redis, targets v0.3 in March",
    ],
)
async def test_a_fact_the_newer_statement_leaves_out_still_answers(connect, several):
    async with connect() as client:
        old = await call_ok(client, "remember", {"content": several, "occurred_at": "2026-01-10"})
        new = await call_ok(client, "remember", {"content": CACHE, "occurred_at": "2026-02-10"})
        assert new["supersedes"] == [] and new.get("superseded_by") is None
        target = await call_ok(client, "recall", {"query": "When does Tidepool target v0.3?"})
        cache = await call_ok(client, "recall", {"query": "What does Tidepool use for its cache?"})
    first = target["memories"][0]
    assert first["id"] == old["id"][:8] and first["content"] == several
    assert "superseded_by" not in first and "valid_until" not in first
    assert [m["content"] for m in cache["memories"]][:2] == [CACHE, several]


async def test_a_memory_of_one_fact_is_still_replaced_whole(connect):
    async with connect() as client:
        old = await call_ok(
            client, "remember", {"content": "Tidepool uses Redis for its cache", "occurred_at": "2026-01-10"}
        )
        new = await call_ok(client, "remember", {"content": CACHE, "occurred_at": "2026-02-10"})
        cache = await call_ok(client, "recall", {"query": "What does Tidepool use for its cache?"})
    assert [s["id"] for s in new["supersedes"]] == [old["id"]]
    replaced = next(m for m in cache["memories"] if m["content"] == "Tidepool uses Redis for its cache")
    assert replaced["superseded_by"] == new["id"][:8]
