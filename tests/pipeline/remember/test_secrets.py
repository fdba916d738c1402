"""Secrets in memory content: what is detected (and what is not), the three modes of
``[remember] secrets``, and that no secret reaches the table, the embedder, the logs or an export,
through every input path (MCP remember and update, the CLI, import)."""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from support.clients import in_process
from support.processes import MEMLANE, serve, server_env

from memlane.pipeline.config import DatabaseConfig, EngineConfig, RememberConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.remember import secrets
from memlane.pipeline.remember.inputs import MemoryInput, MemoryPatch
from memlane.server.logs import RedactSecrets
from memlane.server.settings import Settings

# Fake credentials shaped like the real ones (none is valid anywhere).
OPENAI = "sk-proj-Xq3v9LmT2pR8sK4wN7yB1cD6fG0hJ5aE"
ANTHROPIC = "sk-ant-api03-Zx8Qw2Er4Ty6Ui8Op0As2Df4Gh6Jk8Lz"
AWS_ID = "AKIAZ7QX3RT5VW2YB4NC"
AWS_SECRET = "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"
GITHUB = "ghp_R4nd0mT0k3nV4lu3Qw8Er2Ty6Ui0Op4As8Df"
GITHUB_PAT = "github_pat_11ABCDEFG0" + "x7Q2w9E4r6T1y3U8i5O0p2A4s6D8f0G1h3J5k7L9z2X4c6V8b0N1m3Q5w7E9r1T3y5U7"
SLACK = "xoxb-2048-6613-Rk7Vw2Qp9Zs4"
GOOGLE = "AIzaSyB3x7Q2w9E4r6T1y3U8i5O0p2A4s6D8f0G"
STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx7Q2w9E4r6T1y3U8i5O0p2A4s6D8\nf0G1h3J5k7L9z2X4c6V8b0==\n-----END RSA PRIVATE KEY-----"
DB_PASSWORD = "Tr0ub4dor-and-3"
GENERIC = "Zk8q2Lm9Xr4Tw7Vb3Ns6Pd1H"
MEMLANE_TOKEN = "mlt_" + "Q" * 20 + "x9" * 11 + "z"

POSITIVES = [
    (f"The OpenAI key is {OPENAI} for the staging bot", "openai_key", OPENAI),
    (f"Use {ANTHROPIC} for Claude calls", "anthropic_key", ANTHROPIC),
    (f"CI deploys with {AWS_ID} on us-east-1", "aws_access_key", AWS_ID),
    (f"aws_secret_access_key = {AWS_SECRET}", "aws_secret_key", AWS_SECRET),
    (f"push with {GITHUB}", "github_token", GITHUB),
    (f"fine-grained {GITHUB_PAT} expires in May", "github_token", GITHUB_PAT),
    (f"the bot posts as {SLACK}", "slack_token", SLACK),
    (f"maps key {GOOGLE}", "google_api_key", GOOGLE),
    (f"billing uses {STRIPE}", "stripe_key", STRIPE),
    (f"session cookie was {JWT} yesterday", "jwt", JWT),
    (f"deploy key:\n{PEM}\nkeep it safe", "private_key", PEM),
    (f"connect to postgres://billing:{DB_PASSWORD}@db.internal:5432/billing", "url_password", DB_PASSWORD),
    (f"the webhook secret is {GENERIC}", "secret", GENERIC),
    (f"password: {GENERIC}", "secret", GENERIC),
    (f"The API token = '{GENERIC}'.", "secret", GENERIC),
    (f"memlane token {MEMLANE_TOKEN}", "memlane_token", MEMLANE_TOKEN),
]

NEGATIVES = [
    "Alice prefers tabs over spaces in Python projects",
    "The deploy key is in the team vault; ask Bob for access",
    "Reset your password from the account page; the token expires after an hour",
    "Fixed in commit 3f786850e387550fdab836ed7e6dc881de23001b, see also a94a8fe5",
    "The memory 0190a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d was merged into 8f14e45f-ceea-467a-9a36-dedd4bea2543",
    "We pinned torch==2.13.0+cpu and sentence-transformers 5.1.2 (python 3.11.9, pgvector v0.8.1)",
    "The key insight: keyword_common_df_threshold_value controls selection",
    "token budget: max_tokens=2000, recall.default_max_tokens",
    "Docs at https://docs.example.com/api/v2/keys and git@github.com:acme/web.git",
    "Email carol@example.com or call +1 555 0100; meeting at 10:30 in room B-204",
    "The secret to good coffee is freshly ground beans",
    "sha256 of the release is 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "Use the sk-learn style API; the skeleton key idea from the novel",
    "postgres://localhost:5432/billing has no password, http://user@host/ neither",
]


@pytest.mark.parametrize(
    ("text", "kind", "secret"), POSITIVES, ids=[p[1] + str(i) for i, p in enumerate(POSITIVES)]
)
def test_each_kind_of_secret_is_found_and_replaced_by_its_placeholder(text, kind, secret):
    clean, found = secrets.redact(text)
    assert found == {kind: 1}, found
    assert secret not in clean and f"[REDACTED:{kind}]" in clean


@pytest.mark.parametrize("text", NEGATIVES)
def test_ordinary_text_ids_hashes_and_versions_are_left_alone(text):
    assert secrets.scan(text) == []
    assert secrets.redact(text) == (text, {})


def test_only_the_password_of_a_url_goes_and_several_secrets_are_counted():
    clean, found = secrets.redact(f"db postgres://bob:{DB_PASSWORD}@db/x, keys {OPENAI} and {OPENAI}")
    assert (
        clean
        == "db postgres://bob:[REDACTED:url_password]@db/x, keys [REDACTED:openai_key] and [REDACTED:openai_key]"
    )
    assert found == {"url_password": 1, "openai_key": 2}


def cfg(mode: str) -> EngineConfig:
    return EngineConfig(remember=RememberConfig(secrets=mode))


def test_modes_redact_refuse_and_allow_in_the_one_input_path():
    data = {
        "content": f"staging uses {OPENAI}",
        "metadata": {"env": {"AWS": AWS_ID}, "notes": [f"bearer {JWT}"]},
    }
    m = MemoryInput.parse(cfg("redact"), data)
    assert m.content == "staging uses [REDACTED:openai_key]"
    assert m.metadata == {"env": {"AWS": "[REDACTED:aws_access_key]"}, "notes": ["bearer [REDACTED:jwt]"]}
    assert m.redacted == [
        {"kind": "aws_access_key", "count": 1},
        {"kind": "jwt", "count": 1},
        {"kind": "openai_key", "count": 1},
    ]
    with pytest.raises(InvalidInput) as e:
        MemoryInput.parse(cfg("refuse"), data)
    assert "openai key" in str(e.value) and OPENAI not in str(e.value)
    with pytest.raises(InvalidInput) as e:
        MemoryPatch.parse(cfg("refuse"), {"metadata": {"k": PEM}})
    assert "private key" in str(e.value) and "MIIE" not in str(e.value)
    kept = MemoryInput.parse(cfg("allow"), data)
    assert kept.content == data["content"] and kept.redacted == []
    patch = MemoryPatch.parse(cfg("redact"), {"content": f"rotated to {GITHUB}"})
    assert patch.changes() == {"content": "rotated to [REDACTED:github_token]"}
    assert MemoryInput.parse(cfg("redact"), {"content": "nothing secret"}).redacted == []


def test_the_log_filter_redacts_what_the_sdk_would_log():
    record = logging.LogRecord(
        "mcp.server.sse", logging.DEBUG, __file__, 1, "Received JSON: %s", (OPENAI,), None
    )
    assert RedactSecrets().filter(record) is True
    assert record.getMessage() == "Received JSON: [REDACTED:openai_key]"


# -- end to end: table, embedder, logs, export, import ----------------------------------------------


class RecordingEmbedder:
    """The session's embedder, keeping every text it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seen: list[str] = []

    def embed_batch(self, texts):
        self.seen.extend(texts)
        return self.inner.embed_batch(texts)

    def embed(self, text):
        self.seen.append(text)
        return self.inner.embed(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


ALL_SECRETS = [
    OPENAI,
    ANTHROPIC,
    AWS_ID,
    AWS_SECRET,
    GITHUB,
    SLACK,
    GOOGLE,
    STRIPE,
    JWT,
    "MIIEowIBAAKCAQEA",
    DB_PASSWORD,
    GENERIC,
]


def assert_clean(where: str, text: str) -> None:
    leaked = [s for s in ALL_SECRETS if s in text]
    assert not leaked, f"{where} holds {leaked}"


def table_dump(database_url: str) -> str:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT m::text FROM memories m").fetchall()
    return "\n".join(r[0] for r in rows)


@pytest.mark.slow
@pytest.mark.anyio
async def test_no_secret_reaches_the_table_the_embedder_the_logs_or_an_export(
    database_url, tmp_path, embedder, caplog
):
    caplog.set_level(logging.DEBUG)
    recording = RecordingEmbedder(embedder)
    settings = Settings(data_dir=tmp_path, database=DatabaseConfig(url=database_url))
    async with in_process(settings, embedder=recording) as client:
        r = await client.call_tool(
            "remember",
            {
                "content": f"Billing: {POSITIVES[0][0]}; db postgres://billing:{DB_PASSWORD}@db/billing",
                "project": "billing",
                "metadata": {"aws": {"id": AWS_ID, "secret": f"aws_secret_access_key={AWS_SECRET}"}},
            },
        )
        assert r.is_error is False, r.content[0].text
        out = r.structured_content
        assert out["redacted"] == [
            {"kind": "aws_access_key", "count": 1},
            {"kind": "aws_secret_key", "count": 1},
            {"kind": "openai_key", "count": 1},
            {"kind": "url_password", "count": 1},
        ]
        plain = await client.call_tool("remember", {"content": "Billing runs nightly", "project": "billing"})
        assert "redacted" not in plain.structured_content
        upd = await client.call_tool(
            "update", {"id": out["id"], "content": f"Billing rotated to {STRIPE} and {GITHUB}"}
        )
        assert upd.is_error is False, upd.content[0].text
        assert (
            upd.structured_content["content"]
            == "Billing rotated to [REDACTED:stripe_key] and [REDACTED:github_token]"
        )
        assert upd.structured_content["redacted"] == [
            {"kind": "github_token", "count": 1},
            {"kind": "stripe_key", "count": 1},
        ]
        for text in (f"Slack bot {SLACK}", f"maps {GOOGLE}", f"claude {ANTHROPIC}", f"jwt {JWT}", PEM):
            r = await client.call_tool("remember", {"content": text, "project": "billing"})
            assert r.is_error is False
        res = await client.call_tool(
            "recall", {"query": "billing keys", "project": "billing", "explain": True}
        )
        assert_clean("the recall result", json.dumps(res.structured_content))

    assert "[REDACTED:stripe_key]" in table_dump(database_url)
    assert "[REDACTED:aws_access_key]" in table_dump(database_url)  # the metadata kept its placeholder
    assert_clean("the memories table", table_dump(database_url))
    assert recording.seen and any("[REDACTED:" in t for t in recording.seen)
    assert_clean("the embedder's input", "\n".join(recording.seen))
    assert_clean("the logs", caplog.text + "\n".join(str(r.__dict__) for r in caplog.records))

    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)
    exported = subprocess.run([MEMLANE, "export"], env=env, capture_output=True, text=True, timeout=180)
    assert exported.returncode == 0, exported.stderr
    assert len(exported.stdout.splitlines()) == 7 and "[REDACTED:jwt]" in exported.stdout
    assert_clean("the export", exported.stdout + exported.stderr)


@pytest.mark.slow
def test_the_cli_and_import_redact_and_refuse_mode_stores_nothing(database_url, tmp_path):
    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url)

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [MEMLANE, *args], env={**env, **extra}, capture_output=True, text=True, timeout=180
        )

    r = run("remember", f"ops token {GITHUB}", "--project", "ops")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["redacted"] == [{"kind": "github_token", "count": 1}]
    lines = [
        {"content": f"Slack alerts go through {SLACK}", "project": "ops"},
        {"content": "Ops rotates keys every quarter", "project": "ops", "metadata": {"jwt": JWT}},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = run("import", str(src), "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.splitlines()[-1])
    assert summary["stored"] == 2
    assert summary["redacted"] == [{"kind": "jwt", "count": 1}, {"kind": "slack_token", "count": 1}]
    assert_clean("the table after the CLI and import", table_dump(database_url))

    before = table_dump(database_url)
    refused = run("remember", f"prod key {OPENAI}", "--project", "ops", MEMLANE_REMEMBER__SECRETS="refuse")
    assert refused.returncode == 1 and "openai key" in refused.stderr
    assert_clean("the refusal", refused.stdout + refused.stderr)
    src.write_text(json.dumps({"content": "fine"}) + "\n" + json.dumps({"content": f"key {STRIPE}"}) + "\n")
    refused = run("import", str(src), MEMLANE_REMEMBER__SECRETS="refuse")
    assert refused.returncode == 1 and "line 2" in refused.stderr and "stripe key" in refused.stderr
    assert_clean("the import refusal", refused.stdout + refused.stderr)
    assert table_dump(database_url) == before  # nothing written, not even the good line


@pytest.fixture
def debug_sse_server() -> Iterator[tuple[int, Path]]:
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-secrets-"))
    log = data_dir.parent / (data_dir.name + ".stderr")
    env = server_env(data_dir, MEMLANE_SERVER__LOG_LEVEL="DEBUG")
    with serve(env, transport="sse", log=log) as server:
        yield server.port, log


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_debug_server_logs_no_secret_a_client_sent(debug_sse_server):
    """At DEBUG the SDK's SSE transport logs every request body, secrets included, before memlane
    sees them; the log filter redacts them."""
    port, log = debug_sse_server
    args: dict[str, Any] = {"content": f"prod uses {OPENAI} and {AWS_ID}", "project": "ops"}
    async with Client(sse_client(f"http://127.0.0.1:{port}/sse")) as client:
        r = await client.call_tool("remember", args)
        assert r.is_error is False and r.structured_content["redacted"]
    text = log.read_text()
    assert "Received JSON" in text  # the SDK did log the request body
    assert "[REDACTED:openai_key]" in text
    assert_clean("the server's DEBUG log", text)
