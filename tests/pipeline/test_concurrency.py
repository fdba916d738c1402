"""Concurrent start-up and writes: two servers racing for one fresh data directory, engines racing
to migrate one fresh database, and concurrent writes of the same memory."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import psycopg
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from support.processes import stdio_params

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.store import migrate

pytestmark = pytest.mark.anyio

PER_SERVER = 20
SHARED = 5  # facts both servers write at the same time


@pytest.mark.slow
async def test_two_servers_started_together_on_a_fresh_data_dir_lose_no_memories(tmp_path):
    """Both race the embedded server's start and the migrations, then write concurrently."""
    data_dir = tmp_path / "data"
    params = stdio_params(data_dir)
    shared = [f"Both servers agree that fact {i} about the shared roadmap holds" for i in range(SHARED)]
    results: dict[str, list[dict[str, Any]]] = {}
    done = {"a": anyio.Event(), "b": anyio.Event()}
    final_stats: dict[str, Any] = {}

    async def server(name: str, other: str) -> None:
        with open(tmp_path / f"{name}.stderr", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await session(name, other, client)

    async def session(name: str, other: str, client: Client) -> None:
        out: list[dict[str, Any]] = []

        async def remember(content: str, project: str) -> None:
            r = await client.call_tool("remember", {"content": content, "project": project})
            assert r.is_error is False, f"server {name}: {r.content[0].text}"
            out.append({"content": content, **r.structured_content})

        async with anyio.create_task_group() as tg:
            for i in range(PER_SERVER):
                tg.start_soon(remember, f"Server {name} logged event number {i} in the audit trail", name)
            for content in shared:
                tg.start_soon(remember, content, "shared")
        results[name] = out
        done[name].set()
        await done[other].wait()  # keep both sessions open until both have written
        if name == "a":
            res = await client.read_resource("memlane://stats")
            final_stats.update(json.loads(res.contents[0].text))
            # Each server sees the other's memories.
            r = await client.call_tool(
                "recall", {"query": "Server b logged event number 7", "project": "b", "limit": 100}
            )
            assert len(r.structured_content["memories"]) == PER_SERVER

    try:
        with anyio.fail_after(240):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server, "a", "b")
                tg.start_soon(server, "b", "a")
    except Exception as e:
        logs = "\n".join(
            f"--- server {n} stderr (tail) ---\n{(tmp_path / f'{n}.stderr').read_text()[-3000:]}"
            for n in "ab"
        )
        raise AssertionError(f"{e!r}\n{logs}") from e

    assert final_stats["projects"] == {"a": PER_SERVER, "b": PER_SERVER, "shared": SHARED}
    assert final_stats["memories"] == 2 * PER_SERVER + SHARED
    assert final_stats["missing_embeddings"] == 0
    for name in ("a", "b"):
        own = [r for r in results[name] if r["project"] == name]
        assert len(own) == PER_SERVER and all(r["status"] == "created" for r in own)
        assert len({r["id"] for r in own}) == PER_SERVER
    # The same fact written by both at once is one memory: both got its id, exactly one created it.
    for content in shared:
        [a] = [r for r in results["a"] if r["content"] == content]
        [b] = [r for r in results["b"] if r["content"] == content]
        assert a["id"] == b["id"]
        assert sorted([a["status"], b["status"]]) == ["created", "duplicate"]


@pytest.mark.parametrize("n_engines", [2, 5])
async def test_engines_migrating_one_fresh_database_concurrently_all_succeed(
    database_url, tmp_path, embedder, n_engines
):
    config = EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url))
    engines = [Engine(config, embedder=embedder) for _ in range(n_engines)]
    try:
        await asyncio.gather(*(e.open() for e in engines))
        latest = migrate.latest_version()
        assert [e.store.schema_version for e in engines] == [latest] * n_engines
        with psycopg.connect(database_url) as conn:
            versions = [v for (v,) in conn.execute("SELECT version FROM memlane_migrations ORDER BY version")]
        assert versions == [v for v, _, _ in migrate.available()]

        # Every engine works on the one schema and sees the others' writes.
        outs = await asyncio.gather(
            *(
                e.remember({"content": f"Engine {i} wrote this note about migrations"})
                for i, e in enumerate(engines)
            )
        )
        assert all(o.status == "created" for o in outs)
        for e in engines:
            s = await e.stats()
            assert s["memories"] == n_engines
            assert s["embedding_model"] == embedder.model_id
    finally:
        await asyncio.gather(*(e.close() for e in engines))


async def test_concurrent_remembers_of_one_memory_store_it_once(engine):
    outs = await asyncio.gather(
        *(
            engine.remember({"content": "The incident review is every Wednesday", "project": "ops"})
            for _ in range(12)
        )
    )
    assert len({o.id for o in outs}) == 1
    assert sorted(o.status for o in outs) == ["created"] + ["duplicate"] * 11
    assert (await engine.stats())["projects"] == {"ops": 1}
