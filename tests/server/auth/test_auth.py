"""Access control over real ``memlane serve`` processes: bearer tokens on streamable HTTP and SSE
(401 with WWW-Authenticate), per-project enforcement in every tool and the stats resource through
the SDK's Client, revocation while running, the body limit (413), the per-token rate limit (429),
Host/Origin checks, the memory browser's guard, the refusal to serve beyond the loopback without a
token, and ``memlane token create|list|revoke``."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from support.clients import call_error, call_ok, http_client, read_stats
from support.processes import CLI_TIMEOUT, MEMLANE, free_port, run_memlane, serve, server_env

from memlane.server.auth.token_store import TokenStore, digest

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def memlane(*args: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return run_memlane(*args, env=server_env(data_dir))


# -- one data directory with tokens, served over streamable HTTP (with /ui) and SSE -------------------


class Site:
    def __init__(self, data_dir: Path, http: int, sse: int, tokens: dict[str, str]) -> None:
        self.data_dir, self.http, self.sse, self.tokens = data_dir, http, sse, tokens


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-auth-"))
    store = TokenStore(data_dir / "tokens.json")
    tokens = {
        name: store.create(name, projects)[0]
        for name, projects in [
            ("acme", ["acme*"]),
            ("globex", ["globex"]),
            ("admin", ["*"]),
            ("flood", ["acme"]),
            ("shortlived", ["acme"]),
        ]
    }
    with (
        serve(server_env(data_dir, MEMLANE_UI__ENABLED="true")) as http,
        serve(server_env(data_dir), transport="sse") as sse,
    ):
        yield Site(data_dir, http.port, sse.port, tokens)


async def test_requests_without_a_valid_token_get_401_with_www_authenticate(site):
    async with httpx2.AsyncClient(timeout=30) as h:
        for url, method in [
            (f"http://127.0.0.1:{site.http}/mcp", "POST"),
            (f"http://127.0.0.1:{site.sse}/sse", "GET"),
            (f"http://127.0.0.1:{site.sse}/messages/?session_id={uuid.uuid4().hex}", "POST"),
        ]:
            for auth in (
                None,
                "Bearer mlt_not-a-token",
                f"Bearer {digest(site.tokens['admin'])}",
                "Basic eDp5",
            ):
                headers = {**MCP_HEADERS, **({"authorization": auth} if auth else {})}
                r = await h.request(method, url, headers=headers, json=INIT)
                assert r.status_code == 401, (url, auth, r.status_code)
                challenge = r.headers["www-authenticate"]
                assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
                assert "resource_metadata=" in challenge
        # The challenge points at RFC 9728 metadata that names this resource (public by design).
        meta_url = re.search(r'resource_metadata="([^"]+)"', challenge).group(1)
        meta = (await h.get(meta_url)).json()
        assert meta["resource"] == f"http://127.0.0.1:{site.sse}/sse"
        r = await h.post(f"http://127.0.0.1:{site.http}/mcp", headers=MCP_HEADERS, json=INIT)
        meta = (
            await h.get(re.search(r'resource_metadata="([^"]+)"', r.headers["www-authenticate"]).group(1))
        ).json()
        assert meta["resource"] == f"http://127.0.0.1:{site.http}/mcp"


async def test_a_project_token_sees_nothing_of_another_project(site):
    """The table in the report: what the acme token can learn about globex (nothing)."""
    async with http_client(site.http, site.tokens["admin"]) as admin:
        secret = await call_ok(
            admin, "remember", {"content": "Globex is acquiring Initech in March", "project": "globex"}
        )
        gid = secret["id"]

    async with http_client(site.http, site.tokens["acme"]) as acme:
        # Its own projects work.
        mine = await call_ok(
            acme, "remember", {"content": "Acme's release train leaves on Thursdays", "project": "acme"}
        )
        await call_ok(
            acme, "remember", {"content": "The web team ships from acme-web", "project": "acme-web"}
        )
        res = await call_ok(
            acme, "recall", {"query": "when does the release train leave?", "project": "acme"}
        )
        assert mine["id"].startswith(res["memories"][0]["id"])

        def same(a: str, b: str, x: str, y: str) -> bool:
            return a.replace(x, "X") == b.replace(y, "X")

        # A foreign project, existing or not, and "*": refused in the same words.
        for tool, args in [
            ("recall", {"query": "acquisition plans"}),
            ("remember", {"content": "Acme wants to read Globex's plans"}),
        ]:
            existing = await call_error(acme, tool, {**args, "project": "globex"})
            missing = await call_error(acme, tool, {**args, "project": "globex-never-created"})
            assert "not allowed" in existing
            assert same(existing, missing, "'globex'", "'globex-never-created'"), (existing, missing)
            assert "Initech" not in existing
            star = await call_error(acme, tool, {**args, "project": "*"})
            assert same(existing, star, "'globex'", "'*'")

        # By id (full, or a handle of 8+ hex digits): a globex memory is a missing id.
        absent = str(uuid.uuid4())
        for tool, args in [("forget", {}), ("update", {"content": "Acme rewrote this"})]:
            for theirs, nothing in [(gid, absent), (gid[:8], absent.replace("-", "")[:8])]:
                foreign = await call_error(acme, tool, {"id": theirs, **args})
                none = await call_error(acme, tool, {"id": nothing, **args})
                assert same(foreign, none, theirs, nothing), (foreign, none)
                assert "globex" not in foreign and "Initech" not in foreign

        # A project's categories resource: its own, yes; another's, existing or not, refused alike.
        own = json.loads((await acme.read_resource("memlane://projects/acme/categories")).contents[0].text)
        assert own["project"] == "acme"
        refusals = []
        for project in ("globex", "globex-never-created"):
            with pytest.raises(MCPError, match="not allowed") as refused:
                await acme.read_resource(f"memlane://projects/{project}/categories")
            refusals.append(str(refused.value))
        assert same(*refusals, "'globex'", "'globex-never-created'") and "Initech" not in refusals[0]

        # Stats count its projects only.
        s = await read_stats(acme)
        assert s["projects"] == {"acme": 1, "acme-web": 1} and s["memories"] == 2
        assert "globex" not in json.dumps(s)

    async with http_client(site.http, site.tokens["globex"]) as globex:
        res = await call_ok(globex, "recall", {"query": "who is Globex acquiring?", "project": "globex"})
        assert [m["content"] for m in res["memories"]] == ["Globex is acquiring Initech in March"]
        assert await call_error(globex, "recall", {"query": "release train", "project": "acme"})
        assert (await read_stats(globex))["projects"] == {"globex": 1}

    async with http_client(site.http, site.tokens["admin"]) as admin:
        everything = await read_stats(admin)
        assert everything["projects"] == {"acme": 1, "acme-web": 1, "globex": 1}


async def test_sse_enforces_the_token_projects_too(site):
    headers = {"Authorization": f"Bearer {site.tokens['acme']}"}
    async with Client(sse_client(f"http://127.0.0.1:{site.sse}/sse", headers=headers)) as acme:
        out = await call_ok(acme, "remember", {"content": "Acme's SSE client works", "project": "acme-sse"})
        assert out["project"] == "acme-sse"
        assert "not allowed" in await call_error(acme, "recall", {"query": "plans", "project": "globex"})
        assert "globex" not in json.dumps(await read_stats(acme))


async def test_a_token_revoked_while_the_server_runs_stops_working(site):
    token = site.tokens["shortlived"]
    async with http_client(site.http, token) as client:
        await call_ok(client, "recall", {"query": "anything", "project": "acme"})
        done = memlane("token", "revoke", "shortlived", data_dir=site.data_dir)
        assert done.returncode == 0, done.stderr
        with pytest.raises(Exception):  # noqa: B017 - the transport raises on the 401
            await client.call_tool("recall", {"query": "anything", "project": "acme"})
    async with httpx2.AsyncClient(timeout=30) as h:
        r = await h.post(
            f"http://127.0.0.1:{site.http}/mcp",
            headers={**MCP_HEADERS, "authorization": f"Bearer {token}"},
            json=INIT,
        )
        assert r.status_code == 401


async def test_body_limit_host_and_origin_checks_on_both_transports(site):
    auth = {"authorization": f"Bearer {site.tokens['admin']}"}
    async with httpx2.AsyncClient(timeout=60) as h:
        mcp = f"http://127.0.0.1:{site.http}/mcp"
        # A body over server.max_request_body_bytes (4 MiB): refused before it is read.
        for port, path in [(site.http, "/mcp"), (site.sse, f"/messages/?session_id={uuid.uuid4().hex}")]:
            assert declared_body_status(port, path, 5 * 1024 * 1024, site.tokens["admin"]) == 413
        r = await h.post(mcp, headers={**MCP_HEADERS, **auth, "host": "evil.example"}, json=INIT)
        assert r.status_code == 421
        r = await h.post(mcp, headers={**MCP_HEADERS, **auth, "origin": "http://evil.example"}, json=INIT)
        assert r.status_code == 403
        r = await h.post(
            mcp, headers={**MCP_HEADERS, **auth, "origin": f"http://localhost:{site.http}"}, json=INIT
        )
        assert r.status_code == 200  # a loopback origin is fine

    sse = f"http://127.0.0.1:{site.sse}/sse"
    for headers, status in [({"host": "evil.example"}, 421), ({"origin": "http://evil.example"}, 403)]:
        async with httpx2.AsyncClient(timeout=60) as h:  # the server closes the connection after these
            r = await h.get(sse, headers={**auth, **headers})
            assert r.status_code == status


def declared_body_status(port: int, path: str, size: int, token: str) -> int:
    """The status a POST declaring a ``size``-byte body gets before sending any of it (a client
    could not finish writing 5 MiB to a server that has already answered and closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
                f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                f"Content-Length: {size}\r\n\r\n"
            ).encode()
        )
        status_line = sock.makefile("rb").readline().decode()
    return int(status_line.split()[1])


async def test_a_token_over_its_rate_gets_429_with_retry_after_and_others_do_not(site):
    url = f"http://127.0.0.1:{site.http}/mcp"
    flood = {"authorization": f"Bearer {site.tokens['flood']}"}
    async with httpx2.AsyncClient(timeout=30) as h:
        limited = None
        for _ in range(400):  # default: 60 at once, then 10 per second
            r = await h.get(url, headers=flood)  # no session: 400, but it counts
            if r.status_code == 429:
                limited = r
                break
        assert limited is not None, "no 429 after 400 requests"
        wait = int(limited.headers["retry-after"])
        assert wait >= 1
        assert f"retry after {wait} s" in limited.json()["error_description"]
        r = await h.post(
            url, headers={**MCP_HEADERS, "authorization": f"Bearer {site.tokens['acme']}"}, json=INIT
        )
        assert r.status_code == 200


async def test_servers_on_one_database_share_each_tokens_rate_limit(site):
    """Two more servers on the site's database, 3 requests at once and then one a minute: a token's
    requests alternating between them get 3 answers in all, not 3 from each."""
    token, _ = TokenStore(site.data_dir / "tokens.json").create("balanced", ["acme"])
    env = server_env(
        site.data_dir, MEMLANE_AUTH__RATE_LIMIT_BURST="3", MEMLANE_AUTH__RATE_LIMIT_PER_MINUTE="1"
    )
    with serve(env) as one, serve(env) as two:
        for server in (one, two):  # before its store is open, a server limits on its own
            server.wait_for_log("store open")
        async with httpx2.AsyncClient(timeout=30) as h:
            statuses = [
                (await h.get((one, two)[i % 2].url, headers={"authorization": f"Bearer {token}"})).status_code
                for i in range(6)
            ]
    assert 429 not in statuses[:3] and statuses[3:] == [429, 429, 429], statuses


async def test_the_memory_browser_needs_an_all_projects_token(site):
    async with httpx2.AsyncClient(timeout=60) as h:
        ui = f"http://127.0.0.1:{site.http}/ui/"
        r = await h.get(ui)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer ")
        r = await h.get(ui, headers={"authorization": f"Bearer {site.tokens['acme']}"})
        assert r.status_code == 403 and "--projects '*'" in r.json()["error_description"]
        r = await h.get(ui, headers={"authorization": f"Bearer {site.tokens['admin']}"})
        assert r.status_code == 200 and "globex" in r.text


# -- no token yet: loopback only, until one is created --------------------------------------------------


async def test_a_loopback_server_is_open_until_the_first_token_is_created():
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-auth-open-"))
    with serve(server_env(data_dir)) as served:
        port = served.port
        async with http_client(port, None) as local:  # no token configured: the local user
            await call_ok(local, "remember", {"content": "Local notes need no token", "project": "globex"})
            assert (await read_stats(local))["projects"] == {"globex": 1}
            created = memlane("token", "create", "--projects", "acme", "--name", "first", data_dir=data_dir)
            assert created.returncode == 0, created.stderr
            token = created.stdout.splitlines()[-1]
            with pytest.raises(Exception):  # noqa: B017 - its next request gets 401
                await local.call_tool("recall", {"query": "notes", "project": "globex"})
        async with http_client(port, token) as acme:
            assert (await read_stats(acme))["projects"] == {}
            assert "not allowed" in await call_error(acme, "recall", {"query": "notes", "project": "globex"})


def test_serving_beyond_the_loopback_without_a_token_is_refused():
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-auth-refuse-"))
    for transport in ("http", "sse"):
        r = subprocess.run(
            [MEMLANE, "serve", "--transport", transport, "--host", "0.0.0.0", "--port", str(free_port())],
            env=server_env(data_dir),
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
        )
        assert r.returncode == 2
        assert "refusing to serve on 0.0.0.0 without authentication" in r.stderr
        assert "memlane token create --projects" in r.stderr
    assert not (data_dir / "pg").exists()  # refused before anything started

    # Tokens from the environment: a malformed value is a clear error that never echoes it.
    r = subprocess.run(
        [MEMLANE, "serve", "--transport", "http", "--port", str(free_port())],
        env=server_env(data_dir, MEMLANE_AUTH__TOKENS='[{"name": "ci", "token": "sk-short-and-secret"}]'),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    assert r.returncode == 1 and "MEMLANE_AUTH__TOKENS is not valid" in r.stderr
    assert "sk-short-and-secret" not in r.stderr


def test_token_create_list_revoke():
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-auth-cli-"))
    r = memlane(
        "token", "create", "--projects", "acme*", "--projects", "beta", "--name", "ci", data_dir=data_dir
    )
    assert r.returncode == 0, r.stderr
    token = r.stdout.splitlines()[-1]
    assert re.fullmatch(r"mlt_[A-Za-z0-9_-]{43}", token)
    stored = (data_dir / "tokens.json").read_text()
    assert token not in stored and token[4:] not in stored and digest(token) in stored
    assert json.loads(stored)["tokens"][0]["projects"] == ["acme*", "beta"]

    listed = memlane("token", "list", data_dir=data_dir)
    [row] = [json.loads(line) for line in listed.stdout.splitlines()]
    assert row["name"] == "ci" and row["projects"] == ["acme*", "beta"] and row["created"]
    assert row["sha256_prefix"] == digest(token)[:12] and token not in listed.stdout + listed.stderr

    again = memlane("token", "create", "--projects", "x", "--name", "ci", data_dir=data_dir)
    assert again.returncode == 1 and "exists already" in again.stderr
    bad = memlane("token", "create", "--projects", " ", data_dir=data_dir)
    assert bad.returncode == 1 and "project pattern" in bad.stderr

    gone = memlane("token", "revoke", digest(token)[:8], data_dir=data_dir)
    assert gone.returncode == 0 and json.loads(gone.stdout)["revoked"] == "ci"
    assert json.loads((data_dir / "tokens.json").read_text())["tokens"] == []
    missing = memlane("token", "revoke", "ci", data_dir=data_dir)
    assert missing.returncode == 1 and "no token named 'ci'" in missing.stderr
