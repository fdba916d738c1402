"""The browser's entity pages, the memory page's entities and links, and the SVG graph view, over
HTTP (in-process ASGI client) on a real embedded PostgreSQL: the graph is built at remember time."""

from __future__ import annotations

import re
from html import unescape

import httpx2 as httpx
import pytest

from memlane.server.ui.app import create_app
from memlane.server.ui.metrics import RecallLog

pytestmark = pytest.mark.anyio

EVIL = '<script>alert("x")</script> "&\''


@pytest.fixture
async def client(engine):
    memories = [
        {"content": "Alice owns the billing service and its invoices", "project": "acme"},
        {"content": "Alice moved the billing service to PostgreSQL in May", "project": "acme"},
        {"content": "Bob reviews every change to the billing service", "project": "acme"},
        {"content": "Nothing named here at all", "project": "empty"},
    ]
    ids = [r.id for r in await engine.remember_many(memories)]  # one transaction: one created_at
    # Stored last and alone, so it is the newest mention of Alice.
    ids.insert(3, (await engine.remember({"content": "Alice likes green tea", "project": "acme"})).id)

    async def get_engine():
        return engine

    app = create_app(get_engine, allowed_hosts=["testserver"], recalls=RecallLog())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as c:
        c.engine, c.ids = engine, ids
        yield c


async def entity_id(engine, project: str, key: str) -> int:
    async with engine.store._connection() as conn:
        cur = await conn.execute(
            "SELECT id FROM memlane_entities WHERE project = %s AND key = %s", (project, key)
        )
        row = await cur.fetchone()
    assert row, f"no entity {key!r} in {project!r}"
    return row[0]


async def test_entities_page_lists_names_kinds_and_mention_counts(client):
    r = await client.get("/projects/acme/entities")
    assert r.status_code == 200, r.text
    names = unescape(r.text)
    assert "Alice" in names
    alice = await entity_id(client.engine, "acme", "alice")
    row = re.search(rf'href="/entities/{alice}">Alice</a></td><td>[^<]*</td><td class="num">(\d+)<', r.text)
    assert row and int(row.group(1)) == 3
    # the project page links to it through the nav
    p = await client.get("/projects/acme")
    assert 'href="/projects/acme/entities"' in p.text


async def test_entities_search_keeps_names_containing_the_query(client):
    r = await client.get("/projects/acme/entities", params={"q": "lic"})
    assert "Alice" in r.text and ">Bob<" not in r.text
    r = await client.get("/projects/acme/entities", params={"q": "%"})
    assert "No entity name contains that." in r.text


async def test_a_project_without_entities_says_so_and_an_unknown_one_is_404(client):
    r = await client.get("/projects/empty/entities")
    assert r.status_code == 200
    assert "No entities yet" in r.text
    assert (await client.get("/projects/nope/entities")).status_code == 404


async def test_a_large_project_pages_by_keyset_without_overlap(client):
    async with client.engine.store._connection() as conn:
        await conn.execute(
            "INSERT INTO memlane_entities (project, key, name, kind)"
            " SELECT 'acme', 'zz entity ' || lpad(i::text, 5, '0'), 'ZZ entity ' || i, 'thing'"
            " FROM generate_series(1, 3000) AS i"
        )
    seen: list[str] = []
    url = "/projects/acme/entities?q=zz"
    pages = 0
    while url:
        r = await client.get(url)
        assert r.status_code == 200
        names = re.findall(r'class="entity" href="/entities/\d+">([^<]+)</a>', r.text)
        assert len(names) <= 50
        seen.extend(names)
        nxt = re.search(r'id="next-page" href="\?([^"]+)"', r.text)
        url = f"/projects/acme/entities?{unescape(nxt.group(1))}" if nxt else None
        pages += 1
    assert pages == 60
    assert len(seen) == len(set(seen)) == 3000
    bad = await client.get("/projects/acme/entities", params={"after": "nonsense"})
    assert bad.status_code == 400


async def test_entity_page_shows_memories_newest_first_co_occurring_and_graph(client):
    alice = await entity_id(client.engine, "acme", "alice")
    r = await client.get(f"/entities/{alice}")
    assert r.status_code == 200, r.text
    text = unescape(r.text)
    assert text.index("Alice likes green tea") < text.index("Alice owns the billing service")
    related = r.text[r.text.index('id="related"') :]
    assert "billing service" in related.lower()
    svg = r.text[r.text.index("<svg") : r.text.index("</svg>")]
    for m in (client.ids[0], client.ids[1], client.ids[3]):
        assert f'href="/memories/{m}"' in svg
    assert "mentions" in r.text[r.text.index("<figcaption>") :]


async def test_unknown_entity_ids_are_404(client):
    assert (await client.get("/entities/999999999")).status_code == 404
    assert (await client.get("/entities/abc")).status_code == 404


async def test_memory_page_lists_entities_links_topics_and_graph(client):
    m = client.ids[1]
    r = await client.get(f"/memories/{m}")
    assert r.status_code == 200, r.text
    alice = await entity_id(client.engine, "acme", "alice")
    ents = r.text[r.text.index('id="entities"') : r.text.index('id="links"')]
    assert f'href="/entities/{alice}"' in ents
    assert "topics" in r.text and "fact type" in r.text
    links = r.text[r.text.index('id="links"') : r.text.index('id="graph"')]
    assert "relates_to" in links or "same_time" in links or "No links" in links
    svg = r.text[r.text.index("<svg") : r.text.index("</svg>")]
    assert f'href="/entities/{alice}"' in svg
    assert f'href="/memories/{client.ids[0]}"' in svg  # two hops: memory -> Alice -> another memory


async def test_entity_names_and_memory_text_are_escaped_everywhere(client):
    async with client.engine.store._connection() as conn:
        cur = await conn.execute(
            "INSERT INTO memlane_entities (project, key, name, kind) VALUES ('acme', 'evil', %s, 'name')"
            " RETURNING id",
            (EVIL,),
        )
        evil = (await cur.fetchone())[0]
        await conn.execute(
            "INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s)", (client.ids[0], evil)
        )
    m = await client.engine.remember({"content": EVIL + " and Alice", "project": "acme"})
    async with client.engine.store._connection() as conn:
        await conn.execute("INSERT INTO memory_entities (memory_id, entity_id) VALUES (%s, %s)", (m.id, evil))
    for url in (
        "/projects/acme/entities",
        f"/entities/{evil}",
        f"/memories/{m.id}",
        f"/memories/{client.ids[0]}",
    ):
        r = await client.get(url)
        assert r.status_code == 200, url
        assert "<script>" not in r.text, url
        assert "&lt;script&gt;" in r.text, url


async def test_entity_memories_page_by_keyset_and_co_occurrence_counts_shared_memories(client):
    batch = [{"content": f"Carol and Alice wrote report number {i}", "project": "acme"} for i in range(25)]
    await client.engine.remember_many(batch)
    carol = await entity_id(client.engine, "acme", "carol")
    first = await client.get(f"/entities/{carol}")
    ids = re.findall(r'<td><a href="/memories/([0-9a-f-]+)">', first.text)
    nxt = re.search(r'id="next-page" href="\?([^"]+)"', first.text)
    assert len(ids) == 20 and nxt
    second = await client.get(f"/entities/{carol}?{unescape(nxt.group(1))}")
    more = re.findall(r'<td><a href="/memories/([0-9a-f-]+)">', second.text)
    assert len(more) == 5 and not set(ids) & set(more)
    assert 'id="next-page"' not in second.text
    alice = await entity_id(client.engine, "acme", "alice")
    related = first.text[first.text.index('id="related"') :]
    assert re.search(rf'href="/entities/{alice}">Alice</a> <span class="muted">25 shared', related)
    assert 'id="graph-more"' not in first.text  # 20 memories and a few entities: under 60 nodes


async def test_a_memory_with_many_entities_draws_60_nodes_and_says_how_many_more(client):
    m = client.ids[2]
    async with client.engine.store._connection() as conn:
        await conn.execute(
            "WITH e AS (INSERT INTO memlane_entities (project, key, name, kind)"
            " SELECT 'acme', 'many ' || i, 'Many ' || i, 'thing' FROM generate_series(1, 70) AS i RETURNING id)"
            " INSERT INTO memory_entities (memory_id, entity_id) SELECT %s, id FROM e",
            (m,),
        )
    r = await client.get(f"/memories/{m}")
    svg = r.text[r.text.index("<svg") : r.text.index("</svg>")]
    assert svg.count('<a href="') == 60
    more = re.search(r'id="graph-more">(\d+) more', r.text)
    entities = await client.engine.store.memory_entities([m])
    linked = {link.memory.id for link in await client.engine.store.memory_links(m, 50)}
    second_hop = set()
    for _, e in entities[:8]:
        second_hop |= {o.id for o in (await client.engine.store.entity_memories(e.id, limit=4))[0]}
    drawn = {m} | linked | second_hop
    assert more and int(more.group(1)) == len(drawn) + len(entities) - 60
