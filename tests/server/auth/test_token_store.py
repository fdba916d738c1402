"""Access control's logic and storage, in-process: project patterns, the tokens file, the rate
limiter, the Host/Origin lists, and the engine's per-principal checks on a real database
(tests/server/auth/test_auth.py drives the same through real HTTP servers)."""

from __future__ import annotations

import json
import os
import stat
import uuid

import psycopg
import pytest

from memlane.pipeline.access import (
    LOCAL,
    Principal,
    allowed,
    check,
    readable_projects,
)
from memlane.pipeline.errors import (
    ConfigError,
    InvalidInput,
    NotAllowed,
    NotFound,
)
from memlane.server.auth.http import (
    RateLimiter,
    TokenVerifier,
    principal_of,
    refusal,
    token_store,
    transport_security,
)
from memlane.server.auth.token_store import (
    PREFIX,
    TokenStore,
    digest,
    env_records,
)
from memlane.server.settings import Settings

ACME = Principal("acme-bot", ("acme*",))


# -- patterns -----------------------------------------------------------------------------------------


def test_patterns_allow_matching_projects_only_and_star_only_to_an_all_projects_principal():
    assert allowed(ACME, "acme") and allowed(ACME, "acme-web")
    assert not allowed(ACME, "globex") and not allowed(ACME, "Acme")  # case-sensitive
    assert not allowed(ACME, "*")  # "every project" is not a project acme* covers
    assert allowed(Principal("a", ("*",)), "*") and allowed(Principal("a", ("*",)), "globex")
    assert allowed(None, "anything") and allowed(LOCAL, "*")
    assert not allowed(Principal("nothing", ()), "acme")  # no patterns: nothing
    assert readable_projects(ACME, ["globex", "acme-web", "acme", "default"]) == ["acme", "acme-web"]
    assert readable_projects(None, ["b", "a"]) == ["a", "b"]


def test_refusal_text_is_the_same_for_an_existing_and_a_missing_project():
    def msg(project: str) -> str:
        with pytest.raises(NotAllowed) as e:
            check(ACME, project)
        return str(e.value).replace(repr(project), "P")

    assert msg("globex") == msg("no-such-project")
    assert "acme*" in msg("globex") and "memlane token create" in msg("globex")


# -- the tokens file ------------------------------------------------------------------------------------


def test_tokens_are_stored_as_hashes_and_checked(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    assert not store.configured()
    token, record = store.create("ci", "acme*, beta")
    assert token.startswith(PREFIX) and len(token) >= 40
    text = (tmp_path / "tokens.json").read_text()
    assert token not in text and token[len(PREFIX) :] not in text
    assert digest(token) in text
    assert stat.S_IMODE(os.stat(tmp_path / "tokens.json").st_mode) == 0o600
    assert record.projects == ("acme*", "beta")
    assert store.verify(token).name == "ci"
    assert store.verify(token + "x") is None and store.verify("") is None
    assert store.verify(digest(token)) is None  # the stored hash is not itself a token
    with pytest.raises(InvalidInput, match="exists already"):
        store.create("ci", "x")


def test_a_running_store_sees_tokens_created_and_revoked_by_another_process(tmp_path):
    path = tmp_path / "tokens.json"
    server, cli = TokenStore(path), TokenStore(path)
    assert not server.configured()
    token, _ = cli.create("later", ["acme"])
    assert server.configured() and server.verify(token).name == "later"
    other, rec = cli.create(None, ["acme"])
    assert rec.name.startswith("token-")
    cli.revoke(rec.sha256[:10])  # by hash prefix
    assert server.verify(other) is None and server.verify(token) is not None
    cli.revoke("later")  # by name
    assert server.verify(token) is None and not server.configured()


def test_revoke_refuses_unknown_and_ambiguous(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    store.create("a", ["x"])
    with pytest.raises(InvalidInput, match="no token named 'b'"):
        store.revoke("b")
    with pytest.raises(InvalidInput, match="no token"):
        store.revoke("12")  # too short to be a hash prefix


def test_a_broken_tokens_file_fails_closed(tmp_path):
    path = tmp_path / "tokens.json"
    store = TokenStore(path)
    token, _ = store.create("a", ["x"])
    path.write_text("{ not json")
    assert store.configured()  # the server must not fall back to "no tokens, open on loopback"
    assert store.verify(token) is None


def test_environment_tokens_are_hashed_and_bad_values_are_never_echoed(tmp_path):
    secret = "env-token-" + "k" * 40
    records = env_records(
        json.dumps(
            [
                {"name": "ci", "projects": ["acme*"], "token": secret},
                {"name": "ops", "projects": "*", "sha256": digest("z" * 40)},
            ]
        )
    )
    store = TokenStore(tmp_path / "none.json", records)
    assert store.configured()
    assert store.verify(secret).principal == Principal("ci", ("acme*",))
    assert store.verify("z" * 40).principal.everything
    assert all(secret not in repr(r) for r in records)
    with pytest.raises(ConfigError) as e:
        env_records('[{"name": "x", "projects": ["a"], "token": "short-secret-value"}]')
    assert "short-secret-value" not in str(e.value)
    with pytest.raises(ConfigError) as e:
        env_records("not json at all sk-secret")
    assert "sk-secret" not in str(e.value)


@pytest.mark.anyio
async def test_the_verifier_answers_sdk_access_tokens_carrying_the_projects(tmp_path):
    store = TokenStore(tmp_path / "tokens.json")
    token, _ = store.create("acme-bot", ["acme*"])
    verifier = TokenVerifier(store)
    access = await verifier.verify_token(token)
    assert access.client_id == "acme-bot" and principal_of(access) == ACME
    assert await verifier.verify_token("mlt_wrong") is None


# -- rate limit, Host/Origin, start-up refusal ---------------------------------------------------------


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


# -- the engine, per principal (real PostgreSQL) ----------------------------------------------------------


@pytest.mark.anyio
async def test_engine_enforces_the_principal_on_every_call(engine, database_url):
    mine = await engine.remember({"content": "Acme deploys on Fridays", "project": "acme"})
    theirs = await engine.remember({"content": "Globex deploys on Mondays", "project": "globex"})
    with pytest.raises(NotAllowed):
        await engine.remember({"content": "x", "project": "globex"}, principal=ACME)
    with pytest.raises(NotAllowed):
        await engine.remember({"content": "x"}, principal=ACME)  # the default project is not acme*
    with pytest.raises(NotAllowed):
        await engine.recall(engine.recall_request("deploys", project="globex"), principal=ACME)
    res = await engine.recall(engine.recall_request("deploys", project="acme"), principal=ACME)
    assert [m.id for m, _ in res.memories] == [mine.id]

    # By id: a memory of another project is a missing id, in the same words.
    def same(e1: Exception, e2: Exception, a: str, b: str) -> None:
        assert type(e1) is type(e2) is NotFound
        assert str(e1).replace(a, "ID") == str(e2).replace(b, "ID")

    missing = uuid.uuid4()
    for call in (engine.forget, engine.get):
        with pytest.raises(NotFound) as foreign:
            await call(str(theirs.id), principal=ACME)
        with pytest.raises(NotFound) as absent:
            await call(str(missing), principal=ACME)
        same(foreign.value, absent.value, str(theirs.id), str(missing))
        with pytest.raises(NotFound) as foreign:
            await call(str(theirs.id)[:8], principal=ACME)
        with pytest.raises(NotFound) as absent:
            await call(missing.hex[:8], principal=ACME)
        same(foreign.value, absent.value, str(theirs.id)[:8], missing.hex[:8])
    with pytest.raises(NotFound):
        await engine.update(str(theirs.id), {"content": "hijacked"}, principal=ACME)
    assert (await engine.get(theirs.id)).content == "Globex deploys on Mondays"  # untouched

    stats = await engine.stats(principal=ACME)
    assert stats["projects"] == {"acme": 1} and stats["memories"] == 1
    assert (await engine.stats())["projects"] == {"acme": 1, "globex": 1}

    # Two ids sharing their first 8 hex digits, one per project: the local user's prefix is
    # ambiguous (both listed); acme's resolves to its own and never lists globex's.
    a_id, g_id = (
        uuid.UUID("abcd1234-0000-4000-8000-00000000000a"),
        uuid.UUID("abcd1234-0000-4000-8000-00000000000b"),
    )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_access")  # the recall above counted an access
        conn.execute("UPDATE memories SET id = %s WHERE id = %s", (a_id, mine.id))
        conn.execute("UPDATE memories SET id = %s WHERE id = %s", (g_id, theirs.id))
    with pytest.raises(InvalidInput, match="ambiguous") as e:
        await engine.get("abcd1234")
    assert "globex" in str(e.value)
    assert (await engine.get("abcd1234", principal=ACME)).id == a_id
    gone = await engine.forget("abcd1234", principal=ACME)
    assert gone.id == a_id and (await engine.get(g_id)).project == "globex"
