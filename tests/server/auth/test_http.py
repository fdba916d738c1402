"""The HTTP side of access control, in process: the SDK's token verifier, the rate limiter, the
Host/Origin lists, where the tokens file lives, and the refusal to serve beyond the loopback
without a token (tests/server/auth/test_auth.py drives the same through real HTTP servers)."""

from __future__ import annotations

import pytest

from memlane.pipeline.access import Principal
from memlane.server.auth.http import (
    RateLimiter,
    TokenVerifier,
    principal_of,
    refusal,
    token_store,
    transport_security,
)
from memlane.server.auth.token_store import TokenStore
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
