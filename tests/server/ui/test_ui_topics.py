"""The project page's topics and its topic and fact type filters, and the recall explorer's arms,
over HTTP on a real embedded PostgreSQL. Topics and fact types are assigned by the write path
(remember), summaries by the engine's own refresh (``category_summaries``)."""

from __future__ import annotations

from html import unescape
from urllib.parse import quote

import httpx2 as httpx
import pytest

from memlane.pipeline.config import TopicsConfig
from memlane.server.ui.app import create_app
from memlane.server.ui.metrics import RecallLog

pytestmark = pytest.mark.anyio

XSS_TOPIC = "<script>alert(1)</script>"
MEMORIES = [
    {"content": "PostgreSQL vacuum settings for the billing database", "project": "acme"},
    {"content": "We tuned the PostgreSQL vacuum settings of the billing database", "project": "acme"},
    {"content": "I think tabs are better than spaces", "project": "acme"},
    {"content": "I went hiking in the Alps with Carol", "project": "acme", "occurred_at": "2023-05-14"},
    {"content": "Carol moved to Lisbon to work on maps", "project": "acme", "occurred_at": "2024-02-01"},
    {"content": "The <script>alert(2)</script> banner scripts broke the page", "project": "acme"},
]


@pytest.fixture
async def client(open_engine, engine_config):
    topics = TopicsConfig(custom_topics=[{"name": XSS_TOPIC, "keywords": ["banner"]}])
    engine = await open_engine(engine_config.model_copy(update={"topics": topics}))
    ids = [r.id for r in await engine.remember_many(MEMORIES)]
    await engine.category_summaries("acme")  # the engine's own refresh writes the summaries
    app = create_app(_getter(engine), allowed_hosts=["testserver"], recalls=RecallLog())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as c:
        c.engine, c.ids = engine, ids
        yield c


def _getter(engine):
    async def get_engine():
        return engine

    return get_engine


def _listed(html: str, ids) -> set:
    return {i for i in ids if f"/memories/{i}" in html}


async def test_project_page_lists_topics_with_counts_and_summaries(client):
    topics = await client.engine.store.project_topics(
        "acme", [t.name for t in client.engine.config.topics.custom_topics]
    )
    assert topics, "the write path assigned no topics"
    r = await client.get("/projects/acme")
    assert r.status_code == 200
    assert 'id="topics"' in r.text
    for name, n, _, _ in topics:
        assert f"?topic={quote(name, safe='')}" in r.text
        assert f'<td class="num">{n}</td>' in r.text
    summaries = [s for _, _, _, s in topics if s]
    assert summaries, "no topic has a summary"
    assert unescape(r.text).count(summaries[0][:40]) >= 1


async def test_topic_filter_keeps_only_that_topics_memories(client):
    name, n, _, _ = (
        await client.engine.store.project_topics(
            "acme", [t.name for t in client.engine.config.topics.custom_topics]
        )
    )[0]
    r = await client.get("/projects/acme", params={"topic": name})
    assert r.status_code == 200
    listed = _listed(r.text, client.ids)
    expected = {i for i in client.ids if name in ((await client.engine.get(i)).topics or ())}
    assert listed == expected and len(listed) == n


async def test_fact_type_filter_combines_with_topic_sort_and_pagination(client):
    facts = {i: (await client.engine.get(i)).fact_type for i in client.ids}
    r = await client.get("/projects/acme", params={"fact_type": "opinion"})
    assert _listed(r.text, client.ids) == {i for i, f in facts.items() if f == "opinion"} != set()
    experience = {i for i, f in facts.items() if f == "experience"}
    assert len(experience) >= 2
    r = await client.get("/projects/acme", params={"fact_type": "experience", "sort": "occurred", "limit": 1})
    first = _listed(r.text, client.ids)
    assert len(first) == 1 and first <= experience
    assert "fact_type=experience" in unescape(r.text)  # the next page keeps the filter
    nxt = unescape(r.text).split('id="next-page" href="?', 1)[1].split('"', 1)[0]
    r2 = await client.get("/projects/acme?" + nxt)
    second = _listed(r2.text, client.ids)
    assert len(second) == 1 and second <= experience and second != first
    name = (
        await client.engine.store.project_topics(
            "acme", [t.name for t in client.engine.config.topics.custom_topics]
        )
    )[0][0]
    r = await client.get("/projects/acme", params={"topic": name, "fact_type": "opinion"})
    want = {i for i in client.ids if facts[i] == "opinion" and name in (await client.engine.get(i)).topics}
    assert _listed(r.text, client.ids) == want


async def test_topic_names_and_summaries_are_escaped(client):
    r = await client.get("/projects/acme")
    assert XSS_TOPIC in [
        t
        for t, *_ in await client.engine.store.project_topics(
            "acme", [t.name for t in client.engine.config.topics.custom_topics]
        )
    ]
    assert "<script>" not in r.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.text
    r = await client.get("/projects/acme", params={"topic": XSS_TOPIC})
    assert r.status_code == 200 and "<script>" not in r.text
    assert len(_listed(r.text, client.ids)) == 1


async def test_unknown_topic_lists_nothing_and_empty_project_is_404(client):
    r = await client.get("/projects/acme", params={"topic": "no such topic"})
    assert r.status_code == 200 and "No memory matches these filters." in r.text
    r = await client.get("/projects/empty", params={"topic": "x"})
    assert r.status_code == 404 and "no memories" in r.text


async def test_project_without_topics_has_no_topic_list(client, open_engine, engine_config):
    off = await open_engine(engine_config.model_copy(update={"topics": TopicsConfig(enabled=False)}))
    m = await off.remember({"content": "The office plant needs water on Mondays", "project": "bare"})
    assert (await off.get(m.id)).topics is None  # not assigned: topics are off
    r = await client.get("/projects/bare")
    assert r.status_code == 200 and 'id="topics"' not in r.text
    assert f"/memories/{m.id}" in r.text
    r = await client.get("/projects/bare", params={"topic": "plants", "fact_type": "world"})
    assert r.status_code == 200 and "No memory matches these filters." in r.text


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"fact_type": "rumour"}, "fact_type must be one of world, experience, opinion"),
        ({"topic": "t" * 65}, "topic must be a topic name of at most 64 characters"),
        ({"fact_type": "<b>bad</b>"}, "&lt;b&gt;bad&lt;/b&gt;"),
    ],
)
async def test_bad_filter_values_give_a_400_page(client, params, says):
    r = await client.get("/projects/acme", params=params)
    assert r.status_code == 400
    assert says in r.text and "<b>bad" not in r.text


async def test_search_applies_the_topic_and_fact_type_filters(client):
    r = await client.get("/projects/acme", params={"q": "Carol", "fact_type": "opinion"})
    assert r.status_code == 200
    facts = {i: (await client.engine.get(i)).fact_type for i in client.ids}
    assert all(facts[i] == "opinion" for i in _listed(r.text, client.ids))


def _section(html: str, arm: str) -> str:
    start = html.index(f'id="arm-{arm}"')
    return html[start : html.index("</section>", start)]


async def test_recall_explorer_lists_each_arms_hits_and_the_graph_entry_points(client):
    r = await client.get("/recall", params={"q": "Where did Carol move to?", "project": "acme"})
    assert r.status_code == 200
    assert 'id="candidates"' in r.text  # the per-candidate table stays
    for arm in ("vector", "keyword", "graph"):
        assert f'id="arm-{arm}"' in r.text, arm
    graph = _section(r.text, "graph")
    hiking, lisbon = client.ids[3], client.ids[4]
    assert f"/memories/{hiking}" in graph or f"/memories/{lisbon}" in graph
    assert "Reached from" in graph
    assert "entry memory" in graph or "entity carol" in graph.lower()
    keyword = _section(r.text, "keyword")
    assert f"/memories/{lisbon}" in keyword and '<td class="num">1</td>' in keyword
    stages = r.text[r.text.index('id="stages"') : r.text.index('id="returned"')]
    assert "<dt>hits</dt>" not in stages and "reached" not in stages  # not dumped as JSON there


async def test_recall_explorer_shows_the_temporal_arm_for_a_date_question(client):
    r = await client.get("/recall", params={"q": "What did I do in May 2023?", "project": "acme"})
    assert r.status_code == 200
    temporal = _section(r.text, "temporal")
    assert f"/memories/{client.ids[3]}" in temporal  # happened 2023-05-14
    assert f"/memories/{client.ids[4]}" not in temporal  # happened 2024


async def test_recall_explorer_escapes_memory_text_in_arm_lists(client):
    r = await client.get("/recall", params={"q": "banner scripts", "project": "acme"})
    assert r.status_code == 200 and "<script>" not in r.text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in _section(r.text, "keyword")
