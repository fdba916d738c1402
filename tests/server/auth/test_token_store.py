"""The tokens file: tokens stored as hashes, seen across processes, revoked, failing closed when
broken, and tokens from the environment."""

from __future__ import annotations

import json
import os
import stat

import pytest

from memlane.pipeline.access import Principal
from memlane.pipeline.errors import ConfigError, InvalidInput
from memlane.server.auth.token_store import PREFIX, TokenStore, digest, env_records


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
