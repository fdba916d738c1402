"""Both protocol eras the SDK serves: the 2025-11-25 handshake (``initialize``, then a session) and
2026-07-28 (``server/discover``, every request self-contained). Each sees the same tools in the same
order with the same titles and hints; over streamable HTTP a 2026-07-28 client needs no session
affinity: two servers on one database behind a round-robin client answer as one."""

from __future__ import annotations

import itertools

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from support.clients import call_ok, in_process
from support.processes import serve, server_env, stdio_params

from memlane.pipeline.config import DatabaseConfig
from memlane.server.settings import load

pytestmark = pytest.mark.anyio

LEGACY, MODERN = "2025-11-25", "2026-07-28"
# The client's mode for each era: "legacy" runs the initialize handshake (it offers 2025-11-25).
MODES = {LEGACY: "legacy", MODERN: MODERN}
ORDER = ["remember", "ingest", "recall", "forget", "update"]
# (read-only, destructive) per tool, as the issue of the 2026-07-28 work set them.
HINTS = {
    "remember": (False, False),
    "ingest": (False, False),
    "recall": (True, None),
    "forget": (False, True),
    "update": (False, True),
}


def _surface(listed) -> list[dict]:
    return [t.model_dump(mode="json", exclude_none=True) for t in listed.tools]


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_each_era_lists_the_tools_in_one_order_with_titles_and_hints(
    era, database_url, tmp_path, embedder
):
    settings = load(None, data_dir=tmp_path, database=DatabaseConfig(url=database_url))
    async with in_process(settings, embedder=embedder, mode=MODES[era]) as client:
        assert client.protocol_version == era
        listed = await client.list_tools()
        resources = (await client.list_resources()).resources
    assert [t.name for t in listed.tools] == ORDER
    for tool in listed.tools:
        assert tool.title and tool.title == tool.annotations.title, tool.name
        read_only, destructive = HINTS[tool.name]
        assert tool.annotations.read_only_hint is read_only, tool.name
        if destructive is not None:
            assert tool.annotations.destructive_hint is destructive, tool.name
        assert tool.annotations.open_world_hint is False, tool.name
    stats = next(r for r in resources if str(r.uri) == "memlane://stats")
    assert stats.title == "Memory statistics"


async def test_both_eras_list_exactly_the_same_tools(database_url, tmp_path, embedder):
    settings = load(None, data_dir=tmp_path, database=DatabaseConfig(url=database_url))
    surfaces = []
    for era in (LEGACY, MODERN):
        async with in_process(settings, embedder=embedder, mode=MODES[era]) as client:
            surfaces.append(_surface(await client.list_tools()))
    assert surfaces[0] == surfaces[1]


@pytest.mark.slow
@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_a_spawned_stdio_server_remembers_and_recalls_in_each_era(era, database_url, tmp_path):
    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)
    async with Client(stdio_params(env=env), mode=MODES[era]) as client:
        assert client.protocol_version == era
        assert [t.name for t in (await client.list_tools()).tools] == ORDER
        await call_ok(client, "remember", {"content": f"The {era} client stores its notes in memlane"})
        found = await call_ok(client, "recall", {"query": "where does the client store its notes?"})
    assert [m["content"] for m in found["memories"]][:1] == [f"The {era} client stores its notes in memlane"]


@pytest.mark.slow
async def test_one_http_server_serves_both_eras_at_once(database_url, tmp_path):
    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)
    with serve(env) as served:
        async with Client(served.url, mode="legacy") as old, Client(served.url, mode=MODERN) as new:
            assert (old.protocol_version, new.protocol_version) == (LEGACY, MODERN)
            assert _surface(await old.list_tools()) == _surface(await new.list_tools())
            await call_ok(old, "remember", {"content": "Old clients and new ones share one store"})
            found = await call_ok(new, "recall", {"query": "do old and new clients share a store?"})
    assert found["memories"][0]["content"] == "Old clients and new ones share one store"


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each HTTP request to the next server in turn, as a load balancer without session
    affinity does; ``sent`` records which port got which request."""

    def __init__(self, ports: list[int]) -> None:
        self._next = itertools.cycle(ports)
        self._inner = httpx2.AsyncHTTPTransport()
        self.sent: list[int] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        port = next(self._next)
        self.sent.append(port)
        request.url = request.url.copy_with(port=port)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _round_robin_client(ports: list[int], mode: str) -> tuple[Client, RoundRobin, httpx2.AsyncClient]:
    rr = RoundRobin(ports)
    http = httpx2.AsyncClient(transport=rr)
    url = f"http://127.0.0.1:{ports[0]}/mcp"
    return Client(streamable_http_client(url, http_client=http), mode=mode), rr, http


@pytest.mark.slow
async def test_two_http_servers_behind_a_round_robin_client_answer_as_one(database_url, tmp_path):
    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)
    with serve(env) as a, serve(env) as b:
        ports = [a.port, b.port]
        client, rr, http = _round_robin_client(ports, MODERN)
        async with http, client:
            assert client.protocol_version == MODERN
            assert [t.name for t in (await client.list_tools()).tools] == ORDER
            stored = await call_ok(
                client, "remember", {"content": "The billing service runs on PostgreSQL 18", "project": "rr"}
            )
            query = {"query": "which database does billing use?", "project": "rr"}
            first, second = [await call_ok(client, "recall", query) for _ in ports]
            await call_ok(
                client,
                "update",
                {"id": stored["id"], "content": "The billing service runs on PostgreSQL 19"},
            )
            after_update = [await call_ok(client, "recall", query) for _ in ports]
            await call_ok(client, "forget", {"id": stored["id"]})
            after_forget = [await call_ok(client, "recall", query) for _ in ports]
        # Every request went to the other server than the one before it: both served this session.
        assert all(x != y for x, y in itertools.pairwise(rr.sent)), rr.sent
        assert rr.sent.count(a.port) >= 4 and rr.sent.count(b.port) >= 4, rr.sent
        assert first == second
        assert first["memories"][0]["content"] == "The billing service runs on PostgreSQL 18"
        assert [r["memories"][0]["content"] for r in after_update] == [
            "The billing service runs on PostgreSQL 19"
        ] * 2
        assert [r["memories"] for r in after_forget] == [[], []]

        # The 2025 era keeps a session in one process: without affinity its second request meets
        # a server that never saw the session (why a load balancer must pin those clients).
        client, rr, http = _round_robin_client(ports, "legacy")
        with pytest.raises((MCPError, ExceptionGroup)) as raised:
            async with http, client:
                await client.list_tools()
        assert "Session not found" in _messages(raised.value)


def _messages(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return " ".join(_messages(e) for e in error.exceptions)
    return str(error)
