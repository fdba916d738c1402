"""memlane on an external PostgreSQL, as a production user runs it: a standalone PostgreSQL 18 +
pgvector server the tests start (tests/conftest.py ``external_pg``), a database owned by a role
that is no superuser, reached only through ``database.url``. One ``memlane serve --transport http``
process for the module; the MCP SDK's own client; tokens made with ``memlane token create``.

Also what N servers on one database need of their token files: the servers share a tokens file
(here, one data directory) and each picks up a token created or revoked while it runs."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import psycopg
import pytest
from mcp import Client
from support.clients import call_error, call_ok, http_client
from support.processes import initialize, run_memlane, serve, server_env, stdio_params

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Site:
    url: str  # database.url: the app role's, over TCP with a password
    data_dir: Path
    port: int
    tokens: dict[str, str]

    @property
    def env(self) -> dict[str, str]:
        return server_env(self.data_dir, MEMLANE_DATABASE__URL=self.url)


def create_token(env: dict[str, str], name: str, projects: str) -> str:
    made = run_memlane("token", "create", "--projects", projects, "--name", name, env=env)
    assert made.returncode == 0, made.stderr
    return made.stdout.splitlines()[-1]


@pytest.fixture(scope="module")
def site(external_pg) -> Iterator[Site]:
    name = "smoke_" + uuid.uuid4().hex[:10]
    url = external_pg.create_app_database(name, name)
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-external-"))
    env = server_env(data_dir, MEMLANE_DATABASE__URL=url)
    tokens = {"acme": create_token(env, "acme", "acme*"), "admin": create_token(env, "admin", "*")}
    with serve(env) as served:
        yield Site(url, data_dir, served.port, tokens)


async def _status(port: int, token: str | None) -> int:
    auth = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(timeout=60) as h:
        r = await h.post(f"http://127.0.0.1:{port}/mcp", headers={**MCP_HEADERS, **auth}, json=initialize())
    return r.status_code


async def test_remember_recall_update_ingest_and_forget_over_http(site):
    async with http_client(site.port, site.tokens["acme"]) as client:
        p = {"project": "acme-ops"}
        stored = await call_ok(
            client, "remember", {"content": "The ledger service runs on PostgreSQL 17", **p}
        )
        assert stored["status"] == "created"
        mid = stored["id"]
        found = await call_ok(client, "recall", {"query": "which database runs the ledger?", **p})
        assert found["memories"][0]["content"] == "The ledger service runs on PostgreSQL 17"

        await call_ok(client, "update", {"id": mid, "content": "The ledger service runs on PostgreSQL 18"})
        found = await call_ok(client, "recall", {"query": "which database runs the ledger?", **p})
        assert found["memories"][0]["content"] == "The ledger service runs on PostgreSQL 18"

        text = (
            "Alice: The on-call rotation for the ledger changes every Monday at nine.\n"
            "Bob: ok\n"
            "Alice: Backups of the ledger database are kept for thirty days in the eu-west bucket.\n"
        )
        ingested = await call_ok(client, "ingest", {"text": text, "kind": "conversation", **p})
        assert ingested["counts"]["stored"] >= 2, ingested
        found = await call_ok(client, "recall", {"query": "how long are ledger backups kept?", **p})
        assert "thirty days" in found["memories"][0]["content"]

        gone = await call_ok(client, "forget", {"id": mid})
        assert gone["status"] == "forgotten"
        found = await call_ok(client, "recall", {"query": "which database runs the ledger?", **p})
        assert not any(mid.startswith(m["id"]) for m in found["memories"])

    # The memories are in the external database, written by its non-superuser role; nothing was
    # started in the data directory (it holds the tokens file only).
    with psycopg.connect(site.url) as conn:
        [n] = conn.execute("SELECT count(*) FROM memories WHERE project = 'acme-ops'").fetchone()
        [superuser] = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    assert n == ingested["counts"]["stored"] and superuser is False
    assert {p.name for p in site.data_dir.iterdir()} <= {"tokens.json", "tokens.json.lock", "backups"}


async def test_requests_need_a_valid_token_and_stay_within_its_projects(site):
    assert await _status(site.port, None) == 401
    assert await _status(site.port, "mlt_" + "x" * 43) == 401
    assert await _status(site.port, site.tokens["acme"]) == 200
    async with http_client(site.port, site.tokens["acme"]) as acme:
        assert "not allowed" in await call_error(
            acme, "remember", {"content": "Globex note", "project": "globex"}
        )
    async with http_client(site.port, site.tokens["admin"]) as admin:
        await call_ok(admin, "remember", {"content": "Globex ships on Fridays", "project": "globex"})


async def test_a_stdio_server_on_the_same_database_sees_the_same_memories(site):
    async with http_client(site.port, site.tokens["acme"]) as client:
        await call_ok(
            client,
            "remember",
            {"content": "The stdio and HTTP servers share one store", "project": "acme-io"},
        )
    async with Client(stdio_params(env=site.env)) as stdio:
        found = await call_ok(
            stdio, "recall", {"query": "do the servers share a store?", "project": "acme-io"}
        )
    assert found["memories"][0]["content"] == "The stdio and HTTP servers share one store"


async def test_servers_sharing_a_tokens_file_pick_up_created_and_revoked_tokens(site):
    with serve(site.env) as second:
        ports = [site.port, second.port]
        name = "late-" + uuid.uuid4().hex[:6]
        late = create_token(site.env, name, "acme")
        assert [await _status(p, late) for p in ports] == [200, 200]
        revoked = run_memlane("token", "revoke", name, env=site.env)
        assert revoked.returncode == 0, revoked.stderr
        assert [await _status(p, late) for p in ports] == [401, 401]


def test_doctor_on_a_database_without_pgvector_names_the_sql_to_run(external_pg):
    name = "bare_" + uuid.uuid4().hex[:10]
    url = external_pg.create_app_database(name, name, with_extension=False)
    env = server_env(Path(tempfile.mkdtemp(prefix="memlane-external-bare-")), MEMLANE_DATABASE__URL=url)
    r = run_memlane("doctor", env=env)
    assert r.returncode != 0
    assert f"connected to database {name!r}: CREATE EXTENSION vector;" in r.stdout + r.stderr, (
        r.stdout + r.stderr
    )


async def test_a_running_server_reports_the_missing_extension_then_works_once_it_is_created(external_pg):
    name = "bare_" + uuid.uuid4().hex[:10]
    url = external_pg.create_app_database(name, name, with_extension=False)
    env = server_env(Path(tempfile.mkdtemp(prefix="memlane-external-bare-")), MEMLANE_DATABASE__URL=url)
    async with Client(stdio_params(env=env)) as client:
        message = await call_error(client, "remember", {"content": "Stored once pgvector is enabled"})
        assert "could not start its database" in message and "CREATE EXTENSION vector;" in message, message
        external_pg.execute("CREATE EXTENSION vector", database=name)
        # The next call starts again (no restart of the server needed).
        await call_ok(client, "remember", {"content": "Stored once pgvector is enabled"})
        found = await call_ok(client, "recall", {"query": "what is stored once pgvector is enabled?"})
    assert found["memories"][0]["content"] == "Stored once pgvector is enabled"
