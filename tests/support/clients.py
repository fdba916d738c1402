"""MCP clients for tests: a real ``mcp.Client`` on ``build_server`` in this process, and the checks
every tool call makes (it succeeded, or it failed as a tool result)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memlane.pipeline.engine import Engine
from memlane.server.mcp.app import build_server
from memlane.server.settings import Settings


@asynccontextmanager
async def in_process(
    settings: Settings, *, engine: Engine | None = None, embedder=None, **client_kw: Any
) -> AsyncIterator[Client]:
    """A client on ``build_server(settings)``: its engine is ``engine``, or one on the settings with
    ``embedder`` (the session's model, so no test loads its own). The server's state (and so the
    engine) is closed afterwards. ``client_kw`` go to ``Client`` (``sampling_callback``, ``mode``)."""
    if engine is None:
        engine = Engine(settings.engine(), embedder=embedder)
    server, state = build_server(settings, engine=engine)
    try:
        async with Client(server, **client_kw) as client:
            yield client
    finally:
        await state.close()


def _short(args: dict[str, Any]) -> str:
    text = repr(args)
    return text if len(text) <= 300 else text[:300] + "..."


async def call_ok(client: Client, tool: str, args: dict[str, Any], *, text: bool = False) -> Any:
    """A tool call that must succeed; returns its structured content (or, with ``text``, its text)."""
    r = await client.call_tool(tool, args)
    assert r.is_error is False, f"{tool}({_short(args)}) failed: {r.content[0].text}"
    if text:
        return r.content[0].text
    assert r.structured_content is not None, f"{tool} returned no structured content"
    return r.structured_content


async def call_error(client: Client, tool: str, args: dict[str, Any]) -> str:
    """A tool call that must fail as a tool result (not a protocol error); returns the message."""
    r = await client.call_tool(tool, args)
    assert r.is_error is True, f"{tool}({_short(args)}) unexpectedly succeeded: {r.structured_content}"
    assert r.structured_content is None
    assert len(r.content) == 1
    return r.content[0].text


async def read_stats(client: Client) -> dict[str, Any]:
    """The ``memlane://stats`` resource, parsed."""
    res = await client.read_resource("memlane://stats")
    assert len(res.contents) == 1
    assert res.contents[0].mime_type == "application/json"
    return json.loads(res.contents[0].text)


@asynccontextmanager
async def http_client(port: int, token: str | None) -> AsyncIterator[Client]:
    """A client over streamable HTTP to a ``memlane serve`` on this port, sending ``token``."""
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with (
        create_mcp_http_client(headers=headers) as hc,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=hc)) as client,
    ):
        yield client
