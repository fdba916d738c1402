"""The HTTP side of access control, in process: the SDK's token verifier, the rate limiter (and its
buckets in a real database, shared by two servers), the Host/Origin lists, where the tokens file
lives, and the refusal to serve beyond the loopback without a token (tests/server/auth/test_auth.py
drives the same through real HTTP servers)."""

from __future__ import annotations

import asyncio

import pytest

from memlane.pipeline.access import Principal
from memlane.pipeline.engine import Engine
from memlane.server.auth.http import (
    RateLimiter,
    TokenVerifier,
    http_auth,
    principal_of,
    refusal,
    token_store,
    transport_security,
)
from memlane.server.auth.token_store import TokenStore
from memlane.server.mcp.state import State
from memlane.server.settings import Settings

ACME = Principal("acme-bot", ("acme*",))


@pytest.mark.anyio
async def test_the_verifier_answers_sdk_access_tokens_carrying_the_projects(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    token, _ = store.create("acme-bot", ["acme*"])
    verifier = TokenVerifier(store)
    access = await verifier.verify_token(token)
    assert access.client_id == "acme-bot" and principal_of(access) == ACME
    assert await verifier.verify_token("mlt_wrong") is None


def test_rate_limiter_allows_a_burst_then_the_rate_per_principal():
    now = [0.0]
    rl = RateLimiter(per_minute=60, burst=3, clock=lambda: now[0])
    assert [rl.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    wait = rl.take("a")
    assert wait == pytest.approx(1.0)  # one request per second
    assert rl.take("b") == 0.0  # its own bucket
    now[0] += 1.0
    assert rl.take("a") == 0.0 and rl.take("a") > 0
    assert RateLimiter(per_minute=0, burst=1).take("a") == 0.0  # 0: off


def test_host_and_origin_lists_cover_loopback_bind_address_public_url_and_extras():
    s = Settings(auth={"public_url": "https://mem.example.com"}, server={"allowed_hosts": ["proxy:8443"]})
    sec = transport_security(s, "10.0.0.5")
    assert sec.enable_dns_rebinding_protection
    for h in ("127.0.0.1:*", "localhost:*", "[::1]:*", "10.0.0.5:*", "mem.example.com", "proxy:8443"):
        assert h in sec.allowed_hosts
    assert "https://mem.example.com" in sec.allowed_origins and "http://localhost:*" in sec.allowed_origins
    assert not any("0.0.0.0" in h for h in transport_security(Settings(), "0.0.0.0").allowed_hosts)


def test_tokens_file_defaults_to_the_data_directory_and_can_be_moved(tmp_path):
    assert token_store(Settings(data_dir=tmp_path)).path == tmp_path / "tokens.json"
    elsewhere = tmp_path / "etc" / "memlane-tokens.json"
    moved = token_store(Settings(data_dir=tmp_path, auth={"tokens_file": elsewhere}))
    token, _ = moved.create("a", ["x"])
    assert elsewhere.exists() and not (tmp_path / "tokens.json").exists()
    assert token_store(Settings(auth={"tokens_file": elsewhere})).verify(token).name == "a"


def test_non_loopback_without_tokens_is_refused_with_how_to_make_one(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    why = refusal(Settings(), "0.0.0.0", store)
    assert "memlane token create --projects" in why and str(store.path) in why
    assert refusal(Settings(), "127.0.0.1", store) is None and refusal(Settings(), "::1", store) is None
    store.create("a", ["*"])
    assert refusal(Settings(), "0.0.0.0", store) is None


# -- the buckets in the database: every server on one database shares a token's ------------------------


async def _two_servers(engine_config, embedder):
    """Two engines on one database, as two ``memlane serve`` processes behind a balancer have."""
    a, b = Engine(engine_config, embedder=embedder), Engine(engine_config, embedder=embedder)
    await a.open()
    await b.open()
    return a, b


@pytest.mark.anyio
async def test_servers_on_one_database_share_each_tokens_bucket(engine_config, embedder):
    a, b = await _two_servers(engine_config, embedder)
    try:
        # One request a minute after a burst of 3: nothing refills while the test runs.
        ra = RateLimiter(per_minute=1, burst=3, shared=lambda: a.store)
        rb = RateLimiter(per_minute=1, burst=3, shared=lambda: b.runtime.store)
        taken = [await (ra, rb)[i % 2].acquire("flood") for i in range(3)]
        assert taken == [0.0, 0.0, 0.0]
        # Each process's own bucket would still hold a token or two here.
        for limiter in (ra, rb):
            wait = await limiter.acquire("flood")
            assert 50 < wait <= 60, wait  # a whole token at one a minute, less what refilled since
        assert await rb.acquire("other") == 0.0  # each token has its own bucket
        assert ra.take("flood") == 0.0  # (the process's buckets were not used)

        # The bucket refills by the database's clock: at 10 a second, a quarter second gives two.
        fast = RateLimiter(per_minute=600, burst=1, shared=lambda: b.runtime.store)
        assert await fast.acquire("quick") == 0.0
        assert 0 < await fast.acquire("quick") <= 0.1
        await asyncio.sleep(0.25)
        assert await fast.acquire("quick") == 0.0
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
async def test_without_the_databases_buckets_the_process_limits_alone(engine_config, embedder, caplog):
    a, b = await _two_servers(engine_config, embedder)
    try:
        async with a.store._connection() as conn:
            await conn.execute("DROP TABLE memlane_rate_buckets")  # its statement now fails
        failing = RateLimiter(per_minute=1, burst=2, shared=lambda: a.store)
        with caplog.at_level("WARNING", logger="memlane.auth"):
            assert [await failing.acquire("t") for _ in range(2)] == [0.0, 0.0]
            assert await failing.acquire("t") > 0  # this process's bucket, spent
        assert sum("the database's buckets failed" in r.getMessage() for r in caplog.records) == 1
        await b.close()
        closed = RateLimiter(
            per_minute=1, burst=1, shared=lambda: b.runtime.store
        )  # not serving: no wait for it
        assert await closed.acquire("t") == 0.0 and await closed.acquire("t") > 0
        before_open = RateLimiter(per_minute=1, burst=1, shared=lambda: None)
        assert await before_open.acquire("t") == 0.0 and await before_open.acquire("t") > 0
    finally:
        await a.close()
        await b.close()


@pytest.mark.anyio
async def test_a_server_uses_the_databases_buckets_once_its_store_is_open(engine_config, embedder, tmp_path):
    settings = Settings(data_dir=tmp_path)
    auth = http_auth(
        settings, host="127.0.0.1", port=8000, path="/mcp", store=TokenStore(tmp_path / "t.json")
    )
    state = State(settings, Engine(engine_config, embedder=embedder), auth)
    assert auth.limiter.shared is not None and auth.limiter.shared() is None  # not started yet
    try:
        engine = await state.ready()
        assert auth.limiter.shared() is engine.store
        await auth.limiter.acquire("alice")
        async with engine.store._connection() as conn:
            cur = await conn.execute("SELECT principal, admitted FROM memlane_rate_buckets")
            assert await cur.fetchall() == [("alice", True)]
    finally:
        await state.close()
