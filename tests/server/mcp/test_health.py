"""``/healthz`` and ``/readyz`` on the HTTP and SSE transports' app, in process: unauthenticated
while the MCP endpoint keeps its bearer tokens, ``/readyz`` 503 with a reason until the store is
open and the model loaded, 503 again while the database is down and 200 once it is back, and
nothing in either answer but the status and the reason."""

from __future__ import annotations

import json
import signal
import time
from contextlib import asynccontextmanager

import httpx2 as httpx
import pytest
from support.postmaster import gone, release_embedded, signal_postmaster

from memlane.pipeline.config import DatabaseConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.store.embedded import EmbeddedPostgres
from memlane.server.auth.http import http_auth, token_store
from memlane.server.mcp.app import build_server
from memlane.server.mcp.serve import http_app
from memlane.server.settings import Settings

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def probe_client(settings: Settings, embedder, *, transport: str = "http", token: bool = True):
    """An HTTP client on the transport's app (what ``memlane serve`` serves), with a token
    configured so that the MCP endpoint needs one; the server's state is closed afterwards."""
    store = token_store(settings)
    if token:
        store.create("ops", ["*"])
    path = "/mcp" if transport == "http" else "/sse"
    auth = http_auth(settings, host="127.0.0.1", port=8765, path=path, store=store)
    server, state = build_server(settings, engine=Engine(settings.engine(), embedder=embedder), auth=auth)
    app = http_app(settings, server, state, auth, transport=transport, host="127.0.0.1")
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as c:
            yield c
    finally:
        await state.close()


async def ready_within(client: httpx.AsyncClient, seconds: float) -> list[dict]:
    """Poll /readyz until 200; returns every answer (the first ones are the start-up's 503s)."""
    seen = []
    deadline = time.monotonic() + seconds
    while True:
        r = await client.get("/readyz")
        seen.append({"code": r.status_code, **r.json()})
        if r.status_code == 200:
            return seen
        assert r.status_code == 503 and time.monotonic() < deadline, seen[-3:]
        await _sleep(0.05)


async def _sleep(s: float) -> None:
    import anyio

    await anyio.sleep(s)


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_probes_need_no_token_while_the_mcp_endpoint_does(settings, embedder, transport):
    async with probe_client(settings, embedder, transport=transport) as c:
        r = await c.get("/healthz")
        assert (r.status_code, r.json()) == (200, {"status": "ok"})
        assert r.headers["cache-control"] == "no-store"
        seen = await ready_within(c, 60)
        assert seen[-1] == {"code": 200, "status": "ready"}
        assert (await c.head("/readyz")).status_code == 200
        mcp = await c.post("/mcp" if transport == "http" else "/messages/", json={})
        assert mcp.status_code == 401, mcp.text  # the tokens still guard the MCP endpoint


async def test_readyz_says_why_while_starting_and_reveals_nothing_else(tmp_path, embedder, pg_root):
    from support.db import with_db

    secret_db = "t_missing_" + str(int(time.time() * 1000))
    settings = Settings(data_dir=tmp_path, database=DatabaseConfig(url=with_db(pg_root, secret_db)))
    async with probe_client(settings, embedder) as c:
        answers = []
        for _ in range(40):
            r = await c.get("/readyz")
            answers.append((r.status_code, r.json()))
            if r.json().get("reason", "").startswith("the database could not be opened"):
                break
            await _sleep(0.05)
        assert answers[-1] == (
            503,
            {"status": "not ready", "reason": "the database could not be opened (retrying)"},
        )
        assert all(code == 503 and set(body) == {"status", "reason"} for code, body in answers)
        text = json.dumps(answers)
        assert secret_db not in text and str(tmp_path) not in text and "postgresql" not in text.lower()


@pytest.mark.slow
async def test_readyz_is_503_while_the_database_is_stopped_and_200_once_it_is_back(
    own_data_dir, embedder, tmp_path
):
    dsn = EmbeddedPostgres(own_data_dir).start()  # an external server, for memlane
    settings = Settings(data_dir=tmp_path, database=DatabaseConfig(url=dsn, connect_timeout=2))
    try:
        async with probe_client(settings, embedder) as c:
            before = (await ready_within(c, 60))[-1]
            pid = signal_postmaster(own_data_dir, signal.SIGINT)  # a fast shutdown
            while not gone(pid):
                await _sleep(0.05)
            t0 = time.monotonic()
            r = await c.get("/readyz")
            down = {"code": r.status_code, **r.json()}
            took = time.monotonic() - t0
            assert (await c.get("/healthz")).status_code == 200  # alive all along
            EmbeddedPostgres(own_data_dir).start()
            after = (await ready_within(c, 60))[-1]
        print(f"\n/readyz before: {before}\n/readyz stopped: {down} ({took:.2f} s)\n/readyz back: {after}")
        assert before == after == {"code": 200, "status": "ready"}
        assert down == {"code": 503, "status": "not ready", "reason": "the database is unreachable"}
        assert took < 10
    finally:
        release_embedded(own_data_dir)
