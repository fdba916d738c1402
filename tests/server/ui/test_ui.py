"""The memory browser over HTTP (in-process ASGI client), on a real embedded PostgreSQL: every
route, escaping of user text, CSRF on every change, errors that say what is accepted."""

from __future__ import annotations

import re
import uuid
from html import unescape

import httpx2 as httpx
import pytest

from memlane.pipeline.errors import NotFound
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.request import Filters
from memlane.server.ui.app import create_app
from memlane.server.ui.metrics import RecallLog

pytestmark = pytest.mark.anyio

XSS = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


@pytest.fixture
async def seeded(engine):
    memories = [
        {
            "content": "Alice prefers tabs over spaces in Python projects",
            "project": "acme",
            "category": "preference",
            "tags": ["style"],
        },
        {
            "content": "We picked PostgreSQL for billing because of transactions",
            "project": "acme",
            "category": "decision",
            "priority": 5,
            "pinned": True,
        },
        {
            "content": "The deploy on Friday broke the login page",
            "project": "acme",
            "category": "incident",
            "occurred_at": "2024-05-03",
        },
        {"content": "Bob's birthday is in March", "project": "home/family", "category": "person"},
    ]
    out = [r.id for r in await engine.remember_many(memories)]
    # Stored last (and alone, so it is the newest): every page that lists newest memories shows it.
    xss = await engine.remember({"content": XSS, "project": "acme", "category": "fact", "tags": ["<i>x</i>"]})
    return engine, [*out[:3], xss.id, out[3]]


@pytest.fixture
async def client(seeded):
    engine, ids = seeded
    recalls = RecallLog()

    async def get_engine():
        return engine

    app = create_app(get_engine, allowed_hosts=["testserver"], recalls=recalls)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as c:
        c.engine, c.ids, c.recalls = engine, ids, recalls
        yield c


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert m, "the page has no CSRF field"
    return m.group(1)


async def test_projects_page_lists_every_project_with_counts_and_categories(client):
    r = await client.get("/")
    assert r.status_code == 200
    assert "acme" in r.text and "4 memories" in r.text
    assert "home/family" in r.text and "1 memories" in r.text
    assert "/projects/home%2Ffamily" in r.text  # a project name is one path segment, slash included
    assert "decision · 1" in r.text


async def test_security_headers_are_on_every_response(client):
    for path in ("/", "/nope", "/static/style.css"):
        r = await client.get(path)
        csp = r.headers["content-security-policy"]
        assert "script-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["x-frame-options"] == "DENY"


async def test_memory_text_is_escaped_everywhere_it_is_shown(client):
    xss_id = client.ids[3]
    pages = [
        "/projects/acme",
        f"/memories/{xss_id}",
        f"/memories/{xss_id}/forget",
        "/projects/acme?q=alert+script",
        "/recall?q=alert+script&project=acme",
        "/",
    ]
    for path in pages:
        r = await client.get(path)
        assert r.status_code == 200, path
        assert "<script>" not in r.text, path
        assert "<img src=x" not in r.text, path
        assert "<i>x</i>" not in r.text, path
        assert "&lt;script&gt;" in r.text, path


async def test_a_project_page_lists_its_memories_newest_first(client):
    r = await client.get("/projects/acme")
    assert r.status_code == 200
    rows = re.findall(r'<td class="content"><a href="/memories/([0-9a-f-]+)"', r.text)
    assert len(rows) == 4
    assert str(client.ids[4]) not in rows  # another project's memory
    created = [(await client.engine.get(i)).created_at for i in rows]
    assert created == sorted(created, reverse=True)


async def test_project_pages_paginate_with_a_cursor_and_filter(client):
    seen: list[str] = []
    url = "/projects/acme?limit=1&sort=priority"
    while url:
        r = await client.get(url)
        assert r.status_code == 200
        seen += re.findall(r'<td class="content"><a href="/memories/([0-9a-f-]+)"', r.text)
        nxt = re.search(r'id="next-page" href="\?([^"]+)"', r.text)
        url = "/projects/acme?" + unescape(nxt.group(1)) if nxt else None
    assert len(seen) == 4 and len(set(seen)) == 4
    assert seen[0] == str(client.ids[1])  # priority 5 first
    back: list[str] = []  # and back again from the last page, through the "previous" links
    while True:
        back = re.findall(r'<td class="content"><a href="/memories/([0-9a-f-]+)"', r.text) + back
        prev = re.search(r'id="prev-page" href="\?([^"]+)"', r.text)
        if not prev:
            break
        r = await client.get("/projects/acme?" + unescape(prev.group(1)))
    assert back == seen and 'id="first-page"' not in r.text
    r = await client.get("/projects/acme?pinned=yes")
    assert re.findall(r'<td class="content"><a href="/memories/([0-9a-f-]+)"', r.text) == [str(client.ids[1])]
    r = await client.get("/projects/acme?category=incident")
    assert "deploy on Friday" in r.text and "tabs over spaces" not in r.text
    r = await client.get("/projects/acme?tag=style")
    assert "tabs over spaces" in r.text and "deploy on Friday" not in r.text
    r = await client.get("/projects/acme?since=2024-05-01&until=2024-05-10")
    assert "deploy on Friday" in r.text and "tabs over spaces" not in r.text


async def test_project_search_uses_recall_and_shows_scores(client):
    r = await client.get("/projects/acme?q=which+database+for+billing")
    assert r.status_code == 200
    first = re.search(r'<td class="content"><a href="/memories/([0-9a-f-]+)"', r.text)
    assert first and first.group(1) == str(client.ids[1])
    assert client.recalls.summary()["recalls"] == 1
    assert (await client.engine.get(client.ids[1])).access_count == 0  # looking is not recalling


async def test_unknown_things_are_404_and_bad_parameters_400_with_a_reason(client):
    r = await client.get("/projects/nobody")
    assert r.status_code == 404 and "no project" in r.text
    r = await client.get(f"/memories/{uuid.uuid4()}")
    assert r.status_code == 404
    r = await client.get("/memories/not-a-uuid")
    assert r.status_code == 400 and "is not a memory id" in r.text
    r = await client.get("/nowhere")
    assert r.status_code == 404
    for path, words in [
        ("/projects/acme?sort=size", "sort must be one of created, occurred, priority"),
        ("/projects/acme?limit=abc", "limit must be a whole number"),
        ("/projects/acme?pinned=maybe", "pinned must be yes, no or empty"),
        ("/projects/acme?since=yesterday", "since"),
        ("/projects/acme?cursor=garbage", "cursor is not valid"),
        ("/recall?q=x&mode=turbo", "mode must be one of auto, fast, full"),
        # The recall page's values are checked by RecallQuery: the recall tool's words.
        ("/recall?q=x&limit=0", "limit must be an integer from 1 to 100"),
        ("/recall?q=x&limit=ten", "limit must be an integer from 1 to 100"),
        ("/recall?q=x&as_of=someday", "as_of"),
        ("/recall?q=x&budget=huge", "budget must be one of"),
    ]:
        r = await client.get(path)
        assert r.status_code == 400, path
        assert words in unescape(r.text), (path, r.text[-600:])


async def test_memory_page_shows_every_field(client):
    mid = client.ids[1]
    r = await client.get(f"/memories/{mid}")
    assert r.status_code == 200
    for text in (
        str(mid),
        "acme",
        "decision",
        "PostgreSQL for billing",
        "created at",
        "metadata",
        "recalled",
    ):
        assert text in r.text


async def test_edit_changes_fields_through_the_engine(client):
    mid = client.ids[0]
    page = (await client.get(f"/memories/{mid}")).text
    r = await client.post(
        f"/memories/{mid}/edit",
        data={
            "csrf_token": csrf_of(page),
            "content": "Alice prefers tabs, never spaces",
            "category": "preference",
            "tags": "style, python",
            "priority": "4",
            "metadata": '{"from": "ui"}',
        },
    )
    assert r.status_code == 303 and r.headers["location"] == f"/memories/{mid}?done=saved"
    m = await client.engine.get(mid)
    assert (m.content, m.tags, m.priority, m.metadata) == (
        "Alice prefers tabs, never spaces",
        ("style", "python"),
        4,
        {"from": "ui"},
    )
    found = await client.engine.recall(dict(query="tabs never spaces", project="acme"))
    assert found.memories[0][0].id == mid  # re-embedded: recall finds the new words


async def test_invalid_edit_is_refused_with_the_reason_and_changes_nothing(client):
    mid = client.ids[0]
    before = await client.engine.get(mid)
    token = csrf_of((await client.get(f"/memories/{mid}")).text)
    r = await client.post(
        f"/memories/{mid}/edit", data={"csrf_token": token, "content": "x", "metadata": "{nope"}
    )
    assert r.status_code == 400 and "metadata is not valid JSON" in r.text
    r = await client.post(f"/memories/{mid}/priority", data={"csrf_token": token, "priority": "9"})
    assert r.status_code == 400 and "priority must be from 1 to 5" in r.text
    assert await client.engine.get(mid) == before


async def test_pin_and_priority_forms(client):
    mid = client.ids[0]
    token = csrf_of((await client.get(f"/memories/{mid}")).text)
    r = await client.post(f"/memories/{mid}/pin", data={"csrf_token": token, "pinned": "true"})
    assert r.status_code == 303
    r = await client.post(f"/memories/{mid}/priority", data={"csrf_token": token, "priority": "1"})
    assert r.status_code == 303
    m = await client.engine.get(mid)
    assert m.pinned is True and m.priority == 1


async def test_forget_asks_first_then_deletes_on_the_confirmed_post(client):
    mid = client.ids[2]
    confirm = await client.get(f"/memories/{mid}/forget")
    assert confirm.status_code == 200 and "Forget this memory?" in confirm.text
    await client.engine.get(mid)  # a GET changed nothing
    r = await client.post(f"/memories/{mid}/forget", data={"csrf_token": csrf_of(confirm.text)})
    assert r.status_code == 400 and "confirmation" in r.text
    await client.engine.get(mid)
    r = await client.post(
        f"/memories/{mid}/forget", data={"csrf_token": csrf_of(confirm.text), "confirm": "yes"}
    )
    assert r.status_code == 303 and r.headers["location"] == "/projects/acme?done=forgotten"
    with pytest.raises(NotFound):
        await client.engine.get(mid)


async def test_every_change_without_a_valid_csrf_token_is_refused_and_changes_nothing(client):
    mid = client.ids[0]
    before = await client.engine.get(mid)
    good = csrf_of((await client.get(f"/memories/{mid}")).text)
    posts = [
        (f"/memories/{mid}/forget", {"confirm": "yes"}),
        (f"/memories/{mid}/pin", {"pinned": "true"}),
        (f"/memories/{mid}/priority", {"priority": "5"}),
        (f"/memories/{mid}/edit", {"content": "hijacked"}),
    ]
    for path, data in posts:
        for token in (None, "0" * 64, good[:-1] + ("0" if good[-1] != "0" else "1")):
            form = dict(data, **({"csrf_token": token} if token else {}))
            r = await client.post(path, data=form)
            assert r.status_code == 403 and "Nothing was changed" in r.text, (path, token)
        # The right token from another site (Origin) is refused too.
        r = await client.post(
            path, data=dict(data, csrf_token=good), headers={"origin": "http://evil.example"}
        )
        assert r.status_code == 403, path
    # A valid token without the cookie it was made for (another browser) is refused.
    async with httpx.AsyncClient(transport=client._transport, base_url="http://testserver") as other:
        r = await other.post(f"/memories/{mid}/pin", data={"csrf_token": good, "pinned": "true"})
        assert r.status_code == 403
    assert await client.engine.get(mid) == before


async def test_get_never_changes_anything_and_post_routes_refuse_get(client):
    mid = client.ids[0]
    for path in (f"/memories/{mid}/edit", f"/memories/{mid}/pin", f"/memories/{mid}/priority"):
        r = await client.get(path + "?pinned=true&priority=5&content=x")
        assert r.status_code == 405, path
    assert (await client.engine.get(mid)).priority == 3


async def test_recall_explorer_shows_the_trace_and_every_arm_score(client):
    r = await client.get("/recall?q=which+database+did+we+pick+for+billing&project=acme&limit=2&mode=full")
    assert r.status_code == 200
    trace = client.recalls.samples()[-1]
    stage_names = [name for name, _ in trace.stages]
    assert len(stage_names) >= 5
    rows = re.findall(r'<tr class="stage-row">\s*<td><strong>([^<]+)</strong>', r.text)
    assert rows == stage_names  # the page lists what the trace has, in its order
    assert 'id="trace-picture"' in r.text and r.text.count('<g class="stage ') == len(stage_names)
    assert "skipped" in r.text  # offline: synthesis and HyDE say why they did not run
    header = re.search(r'<table class="list" id="candidates">.*?</thead>', r.text, re.S).group(0)
    assert ">vector<" in header and ">keyword<" in header
    returned = re.findall(r'<span class="badge status ran">#(\d+)</span>', r.text)
    table = re.search(r'<table class="list" id="returned">.*?</table>', r.text, re.S).group(0)
    assert returned and sorted(returned) == [str(i) for i in range(1, table.count("<tr>"))]
    assert "PostgreSQL for billing" in r.text


async def test_recall_explorer_without_a_question_shows_the_form_only(client):
    r = await client.get("/recall")
    assert r.status_code == 200 and 'name="query"' in r.text and 'id="trace-picture"' not in r.text


async def test_recall_explorer_offers_every_recall_parameter_with_the_engine_defaults(client):
    """The form is RecallQuery's parameters: those the tool has and those only the browser and the
    CLI offer; an empty field is the engine's default, which the field shows."""
    r = await client.get("/recall")
    form = re.search(r"<form class=\"filters\".*?</form>", r.text, re.S).group(0)
    names = set(re.findall(r'name="([a-z_]+)"', form))
    offered = {p.name for p in RecallQuery.parameters("ui")}
    assert names == offered
    assert {"as_of", "include_history", "since", "until", "budget", "max_tokens"} <= names
    cfg = client.engine.config.recall
    assert re.search(rf'name="limit" value=""[^>]*placeholder="{cfg.default_limit}"', r.text)
    assert re.search(rf'name="max_tokens" value=""[^>]*placeholder="{cfg.default_max_tokens}"', r.text)
    assert '<option value="">default (auto)</option>' in r.text


async def test_recall_explorer_hands_as_of_history_and_dates_to_recall(client):
    """The fields the browser gained reach the engine: a window that excludes every memory finds
    none, and as_of / include_history are what the trace's query says."""
    base = "/recall?query=which+database+did+we+pick+for+billing&project=acme"
    r = await client.get(base)
    assert "PostgreSQL for billing" in r.text
    r = await client.get(base + "&until=2000-01-01")
    assert r.status_code == 200 and "Nothing was returned." in r.text
    r = await client.get(base + "&since=2000-01-01&as_of=2030-01-01&include_history=on")
    assert r.status_code == 200 and "PostgreSQL for billing" in r.text
    assert 'name="include_history" checked' in r.text and 'value="2030-01-01"' in r.text


async def test_stats_page_charts_memories_and_recall_latency(client):
    r = await client.get("/stats")
    assert r.status_code == 200
    assert 'id="memory-count">5<' in r.text
    assert 'id="memories-chart"' in r.text
    assert "No recall has run" in r.text
    await client.get("/recall?q=billing+database&project=acme")
    await client.get("/recall?q=login+page&project=acme")
    r = await client.get("/stats")
    assert 'id="latency-chart"' in r.text
    latency_rows = re.findall(r"<tr><td>([^<]+)</td><td class=\"num\">2</td>", r.text)
    assert "retrieval" in latency_rows and "whole recall" in latency_rows


async def test_mounted_under_a_prefix_every_link_and_redirect_keeps_it(client):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    async def get_engine():
        return client.engine

    outer = Starlette(routes=[Mount("/ui", app=create_app(get_engine, allowed_hosts=["testserver"]))])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=outer), base_url="http://testserver") as c:
        r = await c.get("/ui/")
        assert r.status_code == 200
        links = re.findall(r'href="(/[^"]*)"', r.text)
        assert links and all(link.startswith("/ui/") for link in links), links
        mid = client.ids[0]
        page = await c.get(f"/ui/memories/{mid}")
        assert f'action="/ui/memories/{mid}/pin"' in page.text
        r = await c.post(f"/ui/memories/{mid}/pin", data={"csrf_token": csrf_of(page.text), "pinned": "true"})
        assert r.status_code == 303 and r.headers["location"] == f"/ui/memories/{mid}?done=saved"
        assert (await c.get("/ui/static/style.css")).status_code == 200


async def test_other_host_headers_are_refused(seeded):
    engine, _ = seeded

    async def get_engine():
        return engine

    app = create_app(get_engine)  # default: loopback names only (no DNS rebinding)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8766") as c:
        assert (await c.get("/")).status_code == 200
    async with httpx.AsyncClient(transport=transport, base_url="http://attacker.example") as c:
        assert (await c.get("/")).status_code == 400


def test_non_loopback_addresses_are_refused():
    from memlane.server.ui.run import refusal

    assert refusal("127.0.0.1") is None and refusal("localhost") is None and refusal("::1") is None
    assert "no login" in refusal("0.0.0.0") and refusal("192.168.1.5")


@pytest.mark.slow
def test_memlane_ui_refuses_a_non_loopback_address(tmp_path):
    import subprocess

    from support.processes import MEMLANE, server_env

    proc = subprocess.run(
        [MEMLANE, "ui", "--host", "0.0.0.0", "--port", "9"],
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "refusing to serve the memory browser on 0.0.0.0" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.slow
def test_http_server_serves_the_browser_at_ui_when_enabled(database_url, tmp_path, http_server):
    import subprocess

    from support.processes import MEMLANE, server_env

    env = server_env(tmp_path, MEMLANE_DATABASE__URL=database_url, MEMLANE_UI__ENABLED="true")
    refused = subprocess.run(
        [MEMLANE, "serve", "--transport", "http", "--host", "0.0.0.0", "--port", "9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "refusing to serve the memory browser" in refused.stderr
    port = http_server(env).port
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as c:
        r = c.get("/ui/")
        assert r.status_code == 200 and "<h1>Projects</h1>" in r.text
        assert 'href="/ui/recall"' in r.text and "script-src 'none'" in r.headers["content-security-policy"]
        assert c.get("/ui", follow_redirects=False).status_code == 308
        assert c.get("/ui/stats").status_code == 200


async def test_forgetting_the_last_memory_of_a_project_returns_to_the_projects(client):
    mid = client.ids[4]  # the only memory of home/family
    token = csrf_of((await client.get(f"/memories/{mid}/forget")).text)
    r = await client.post(f"/memories/{mid}/forget", data={"csrf_token": token, "confirm": "yes"})
    assert r.status_code == 303 and r.headers["location"] == "/"
    assert "home/family" not in (await client.get("/")).text
    assert (await client.get("/projects/home%2Ffamily")).status_code == 404
    assert (await client.get("/projects/")).status_code == 404


async def test_category_names_come_from_the_index_in_order(client):
    assert await client.engine.store.category_names("acme") == ["decision", "fact", "incident", "preference"]
    assert await client.engine.store.category_names("nobody") == []
    r = await client.get("/projects/acme")
    menu = re.search(r'<select name="category">.*?</select>', r.text, re.S).group(0)
    assert re.findall(r'<option value="([a-z]+)"', menu) == ["decision", "fact", "incident", "preference"]


def test_recall_log_keeps_the_last_recalls_and_reports_percentiles_per_stage():
    log = RecallLog(size=3)
    for ms in (10.0, 20.0, 30.0, 40.0):
        log.record(
            {
                "total_ms": ms,
                "stages": [{"stage": "retrieval", "ms": ms / 2}, {"stage": "new-arm", "ms": 1.0}],
            },
            source="mcp",
        )
    log.record(
        {"total_ms": 999.0, "route": "deferred: waiting for the client's model", "stages": []}, source="mcp"
    )
    s = log.summary()
    assert s["recalls"] == 3  # bounded; the deferred first round is not a finished recall
    assert s["total"] == {"n": 3, "p50": 30.0, "p95": 40.0}
    assert list(s["stages"]) == ["retrieval", "new-arm"]  # whatever stages the traces had, in order
    assert s["stages"]["retrieval"]["p50"] == 15.0


def test_counts_per_day_are_regrouped_into_weeks_or_months_when_the_span_is_long():
    from datetime import UTC, datetime, timedelta

    from memlane.server.ui.charts import bar_chart, bucket_counts

    start = datetime(2024, 1, 1, tzinfo=UTC)
    days = [(start + timedelta(days=i), 1) for i in range(10)]
    assert bucket_counts(days) == (
        "day",
        [((start + timedelta(days=i)).strftime("%Y-%m-%d"), 1) for i in range(10)],
    )
    unit, weeks = bucket_counts([(start + timedelta(days=i), 1) for i in range(100)])
    assert unit == "week" and sum(n for _, n in weeks) == 100 and len(weeks) == 15
    unit, months = bucket_counts([(start + timedelta(days=i), 2) for i in range(800)])
    assert unit == "month" and months[0] == ("2024-01", 62) and sum(n for _, n in months) == 1600
    chart = bar_chart(weeks)
    assert len(chart["bars"]) == 15 and max(b["h"] for b in chart["bars"]) == chart["plot_h"]


async def test_the_edit_form_sends_only_what_changed(client):
    from memlane.server.ui.forms import edit_changes

    m = await client.engine.get(client.ids[2])  # occurred_at 2024-05-03, category incident
    unchanged = {
        "content": m.content,
        "category": m.category,
        "tags": ", ".join(m.tags),
        "priority": str(m.priority),
        "occurred_at": m.occurred_at.isoformat(),
        "expires_at": "",
        "metadata": "{}",
    }
    assert edit_changes(m, unchanged) == {}  # nothing to embed again
    assert edit_changes(m, {**unchanged, "category": "", "occurred_at": ""}) == {}  # cannot remove
    assert edit_changes(m, {**unchanged, "pinned": "on", "tags": "A, b"}) == {
        "pinned": True,
        "tags": ["a", "b"],
    }


async def test_the_mcp_recall_tool_feeds_the_stats_page_of_the_same_process(settings, embedder):
    from mcp import Client

    from memlane.pipeline.engine import Engine
    from memlane.server.mcp.app import build_server
    from memlane.server.ui.metrics import RECALLS

    server, state = build_server(settings, engine=Engine(settings.engine(), embedder=embedder))
    before = RECALLS.samples()[-1:]  # the log is process-wide and bounded: compare its newest entry
    try:
        async with Client(server) as mcp_client:
            await mcp_client.call_tool("remember", {"content": "The cache is Redis 7", "project": "p"})
            r = await mcp_client.call_tool("recall", {"query": "which cache?", "project": "p"})
            assert r.is_error is False
        newest = RECALLS.samples()[-1]
        assert newest not in before and newest.source == "mcp"
        assert "retrieval" in dict(newest.stages)
        app = create_app(state.ready, allowed_hosts=["testserver"])  # the mounted browser's default log
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        ) as c:
            page = (await c.get("/stats")).text
        assert re.search(r"from this browser, \d+ from MCP clients", page)
        assert 'id="latency-chart"' in page
    finally:
        await state.close()


async def test_keyset_pages_go_forward_and_back_over_a_short_last_page(seeded):
    from memlane.pipeline.errors import InvalidInput

    engine, _ = seeded
    first = await engine.store.browse(
        Filters.parse(engine.config, {"projects": ["acme"]}), sort="occurred", limit=3
    )
    assert len(first.memories) == 3 and first.prev_cursor is None and first.next_cursor
    last = await engine.store.browse(
        Filters.parse(engine.config, {"projects": ["acme"]}),
        sort="occurred",
        cursor=first.next_cursor,
        limit=3,
    )
    assert len(last.memories) == 1 and last.next_cursor is None and last.prev_cursor
    again = await engine.store.browse(
        Filters.parse(engine.config, {"projects": ["acme"]}),
        sort="occurred",
        before=last.prev_cursor,
        limit=3,
    )
    assert [m.id for m in again.memories] == [m.id for m in first.memories]
    assert again.prev_cursor is None and again.next_cursor == first.next_cursor
    everything = (
        await engine.store.browse(
            Filters.parse(engine.config, {"projects": ["acme"]}), sort="occurred", limit=10
        )
    ).memories
    whens = [m.occurred_at or m.created_at for m in everything]
    assert whens == sorted(whens, reverse=True) and [m.id for m in everything][:3] == [
        m.id for m in first.memories
    ]
    with pytest.raises(InvalidInput, match="not both"):
        await engine.store.browse(
            Filters.parse(engine.config, {"projects": ["acme"]}),
            cursor=first.next_cursor,
            before=first.next_cursor,
        )
    with pytest.raises(InvalidInput, match="cursor is not valid"):
        await engine.store.browse(
            Filters.parse(engine.config, {"projects": ["acme"]}), sort="priority", cursor=first.next_cursor
        )  # a cursor of another sort


async def test_a_memory_page_shows_its_chain_and_its_earlier_contents_and_the_project_hides_replaced(client):
    engine = client.engine
    old = await engine.remember(
        {"content": "Maya lives in Lisbon", "project": "acme", "occurred_at": "2024-01-10"}
    )
    new = await engine.remember(
        {"content": "Maya moved to Berlin for her new job", "project": "acme", "occurred_at": "2025-06-01"}
    )
    assert [s.id for s in new.supersedes] == [old.id]
    await engine.update(str(new.id), {"content": "Maya moved to <b>Berlin</b> for a new job"})

    page = (await client.get(f"/memories/{old.id}")).text
    assert 'id="superseded-by"' in page and f"/memories/{new.id}" in page and "2025-06-01" in page
    page = (await client.get(f"/memories/{new.id}")).text
    assert 'id="supersedes"' in page and "Maya lives in Lisbon" in page
    assert 'id="versions"' in page and "Maya moved to Berlin for her new job" in page
    assert "<b>Berlin</b>" not in page and "&lt;b&gt;Berlin&lt;/b&gt;" in page  # escaped like any memory

    listed = (await client.get("/projects/acme")).text
    assert "Maya lives in Lisbon" not in listed and "Maya moved to" in listed
    shown = (await client.get("/projects/acme?replaced=shown")).text
    assert "Maya lives in Lisbon" in shown and 'class="badge replaced"' in shown
    assert (await client.get("/projects/acme?replaced=maybe")).status_code == 400


async def test_the_no_category_chip_lists_exactly_the_memories_without_a_category(client):
    engine = client.engine
    added = await engine.remember_many(
        [
            # Common words only: no key terms, so no automatic topic and no category is made for it.
            {"content": "It was a good day", "project": "notes"},
            {"content": "The <b>standup</b> moved to ten", "project": "notes"},
            {"content": "Ship the beta on Thursday", "project": "notes", "category": "plan"},
            # The old broken link's value as a real category: not to be taken for "no category".
            {"content": "Nothing to see", "project": "notes", "category": "none"},
        ]
    )
    notes = [await engine.get(str(r.id)) for r in added]
    without = {str(m.id) for m in notes if m.category is None}
    assert str(added[0].id) in without

    home = (await client.get("/")).text
    chip = re.search(r'<a class="badge cat" href="(/projects/notes\?[^"]*)">no category · (\d+)</a>', home)
    assert chip, "the home page has no 'no category' chip for notes"
    assert int(chip.group(2)) == len(without)
    r = await client.get(unescape(chip.group(1)))
    assert r.status_code == 200
    assert {str(m.id) for m in notes if f"/memories/{m.id}" in r.text} == without
    assert "No memory matches these filters" not in r.text
    assert 'id="uncategorized" checked' in r.text  # the form shows the filter it applied

    # A search with the filter keeps only what recall found without a category.
    found = (await client.get("/projects/notes?q=standup+beta+good+day&uncategorized=1")).text
    assert f"/memories/{added[2].id}" not in found and f"/memories/{added[3].id}" not in found
    assert {str(m.id) for m in notes if f"/memories/{m.id}" in found} <= without
    assert f"/memories/{added[0].id}" in found or f"/memories/{added[1].id}" in found

    # Every other category chip of the home page lists its memories, "none" included.
    chips = re.findall(r'<a class="badge cat" href="(/projects/notes\?category=[^"]*)">([^<]*) · ', home)
    assert {unescape(name) for _, name in chips} >= {"plan", "none"}
    for href, name in chips:
        page = (await client.get(unescape(href))).text
        assert {str(m.id) for m in notes if f"/memories/{m.id}" in page} == {
            str(m.id) for m in notes if m.category == unescape(name)
        }

    # The chips on a memory row filter the project page too.
    listed_page = (await client.get("/projects/acme")).text
    tag = re.search(r'<a class="badge tag" href="(/projects/acme\?tag=style)">style</a>', listed_page)
    assert tag and "tabs over spaces" in (await client.get(tag.group(1))).text
    assert "/projects/acme?category=decision" in listed_page
    # Asking for a category and for none at once is refused with the reason.
    both = await client.get("/projects/acme?category=decision&uncategorized=1")
    assert both.status_code == 400 and "not both" in both.text
    assert (await client.get("/projects/acme?uncategorized=yes")).status_code == 400


async def test_a_replaced_memory_opens_with_a_banner_naming_its_replacement_and_the_undo(client):
    engine = client.engine
    old = await engine.remember(
        {"content": "Maya lives in <i>Lisbon</i>", "project": "acme", "occurred_at": "2024-01-10"}
    )
    new = await engine.remember(
        {
            "content": "Maya moved to <i>Berlin</i> for her new job",
            "project": "acme",
            "occurred_at": "2025-06-01",
        }
    )
    assert [s.id for s in new.supersedes] == [old.id]
    page = (await client.get(f"/memories/{old.id}")).text
    banner = re.search(r'<div class="banner replaced" id="replaced-banner".*?</div>', page, re.S)
    assert banner, "a replaced memory's page has no banner"
    assert page.index('id="replaced-banner"') < page.index('id="content"')  # above the memory itself
    text = banner.group(0)
    assert f'href="/memories/{new.id}"' in text and "2025-06-01" in text
    assert f"memlane unsupersede {old.id}" in text
    assert "<i>Berlin</i>" not in page and "&lt;i&gt;Berlin&lt;/i&gt;" in text  # memory text escaped
    # The newer memory and a memory never replaced have none.
    assert 'id="replaced-banner"' not in (await client.get(f"/memories/{new.id}")).text
    assert 'id="replaced-banner"' not in (await client.get(f"/memories/{client.ids[0]}")).text
    # Undone, the banner goes.
    await engine.unsupersede(str(old.id))
    assert 'id="replaced-banner"' not in (await client.get(f"/memories/{old.id}")).text
