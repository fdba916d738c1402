"""The memory graph: entity extraction (pure), entities and links on the write path (real
PostgreSQL), their upkeep by ``memlane maintain --task links``, and the graph arm of recall."""

import asyncio

import psycopg
import pytest

from memlane.pipeline import entities, maintain
from memlane.pipeline.config import GraphConfig, LLMStageConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.entities import (
    Entity,
    extract,
    normalise,
    resolve_aliases,
)
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.graph import arm as graph
from memlane.pipeline.recall import render
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.fuse import score_fusion
from memlane.pipeline.recall.intent import analyse_offline
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.recall.retrieve import retrieve
from memlane.pipeline.records import Query
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.pipeline.store import graph_reads, vectors
from memlane.pipeline.store.graph_reads import GraphRead
from memlane.pipeline.store.writes import WRITE_LOCK_CLASS
from memlane.pipeline.tokens import count_tokens

pytestmark = pytest.mark.anyio


def keys(text: str) -> list[str]:
    return [e.key for e in extract(text)]


def kinds(text: str) -> dict[str, str]:
    return {e.key: e.kind for e in extract(text)}


# -- extraction (pure) -------------------------------------------------------------------------


def test_names_multi_word_and_possessive():
    assert keys("Caroline's dog met John Smith in New York.") == ["caroline", "john smith", "new york"]
    assert keys("We flew to the Bank of America tower with Dr Patel") == ["bank of america", "dr patel"]
    assert extract("Caroline’s sister")[0].name == "Caroline"


def test_sentence_initial_common_words_and_i_are_not_names():
    assert keys("The deploy went well. When I left. Yesterday was fine. Thanks! Sorry.") == []
    assert keys("I think so. Honestly I do.") == []
    # A name stays a name at the start of a sentence or a speaker's turn.
    assert keys("Caroline: Hey Mel! John said hi.") == ["caroline", "mel", "john"]


def test_technical_terms_handles_emails_urls_and_paths():
    text = (
        "The node.js v2.3.1 build of PostgreSQL failed on fp-700 (see my_var); see /etc/nginx/nginx.conf "
        "and src/app/main.py, mail bob@example.com or @bobby, https://example.com/x?y=1."
    )
    assert kinds(text) == {
        "node.js": "term",
        "v2.3.1": "term",
        "postgresql": "term",
        "fp-700": "term",
        "my_var": "term",
        "/etc/nginx/nginx.conf": "path",
        "src/app/main.py": "path",
        "bob@example.com": "email",
        "@bobby": "handle",
        "https://example.com/x?y=1": "url",
    }


def test_numbers_abbreviations_and_plain_words_are_not_terms():
    assert keys("It costs 3.50 and 1.2.3, e.g. at 10 a.m. every day") == []


def test_one_entity_per_key_in_order_and_bounded():
    assert keys("Alice met ALICE? no: Alice's cat met Bob, then Alice") == ["alice", "bob"]
    many = " ".join(f"Name{i}x" for i in range(100))
    assert len(extract(many)) == entities.MAX_ENTITIES


def test_normalise():
    assert normalise("  Caroline's ") == "caroline"
    assert normalise("New   York.") == "new york"
    assert normalise("James’") == "james" and normalise("James's") == "james"


def test_ties_among_graph_nodes_order_as_their_text_does():
    """The arm breaks ties by a node's text (deterministic, never the random ids' hash order); its
    sort key orders entity nodes and memory ids exactly as ``str`` would, without formatting ids."""
    import random
    import uuid

    rng = random.Random(3)
    nodes = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(200)]
    nodes += [("e", rng.randrange(1, 10**6)) for _ in range(50)] + [("e", 7), ("e", 70), ("e", 123)]
    rng.shuffle(nodes)
    assert sorted(nodes, key=graph._order) == sorted(nodes, key=str)


def test_a_first_name_resolves_to_the_one_full_name_only_when_unambiguous():
    caroline = Entity("caroline smith", "Caroline Smith", "name")
    found = resolve_aliases([Entity("caroline", "Caroline", "name")], [caroline])
    assert found == [caroline]
    two = [caroline, Entity("caroline jones", "Caroline Jones", "name")]
    assert resolve_aliases([Entity("caroline", "Caroline", "name")], two)[0].key == "caroline"
    # A term is never resolved as a name.
    assert resolve_aliases([Entity("caroline", "caroline", "term")], [caroline])[0].kind == "term"


def test_intent_uses_the_same_extractor():
    intent = analyse_offline("What did Caroline's sister say about node.js at the PyCon talk?")
    assert intent.entities == ("Caroline", "node.js", "PyCon")
    assert analyse_offline("When did I move?").entities == ()


# -- the write path --------------------------------------------------------------------------------


def rows(database_url: str, sql: str, params=()) -> list[tuple]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(sql, params).fetchall()


def links(database_url: str, kind: str) -> set[tuple]:
    return {
        tuple(map(str, r))
        for r in rows(database_url, "SELECT src, dst FROM memory_links WHERE kind = %s", (kind,))
    }


def mentions(database_url: str, memory_id) -> set[str]:
    return {
        r[0]
        for r in rows(
            database_url,
            "SELECT e.key FROM memory_entities me JOIN memlane_entities e ON e.id = me.entity_id"
            " WHERE me.memory_id = %s",
            (memory_id,),
        )
    }


async def test_remember_stores_entities_and_next_links_by_source_and_position(engine, database_url):
    turns = [
        {"content": "Caroline: I went to the LGBTQ support group", "source": "s1", "position": 0},
        {"content": "Melanie: how was it, Caroline?", "source": "s1", "position": 1},
        {"content": "Caroline: it was great", "source": "s1", "position": 2},
    ]
    ids = [r.id for r in await engine.remember_many(turns)]
    assert mentions(database_url, ids[0]) == {"caroline", "lgbtq"}
    assert mentions(database_url, ids[1]) == {"melanie", "caroline"}
    # One entity node per key per project, whatever the case or possessive.
    assert rows(database_url, "SELECT count(*) FROM memlane_entities WHERE key = 'caroline'") == [(1,)]
    assert links(database_url, "next") == {(str(ids[0]), str(ids[1])), (str(ids[1]), str(ids[2]))}
    # A piece remembered later between known positions links to both sides.
    late = await engine.remember({"content": "Caroline: and the talk after", "source": "s1", "position": 3})
    assert (str(ids[2]), str(late.id)) in links(database_url, "next")
    assert rows(database_url, "SELECT count(*) FROM memory_linked") == [(4,)]


async def test_a_batch_sharing_a_source_is_chained_but_an_import_or_mixed_sources_are_not(
    engine, database_url
):
    batch = await engine.remember_many(
        [{"content": f"step {i} of the migration", "source": "chat-9"} for i in range(3)]
    )
    chained = links(database_url, "next")
    assert chained == {(str(batch[0].id), str(batch[1].id)), (str(batch[1].id), str(batch[2].id))}
    # An import batch (chain=False) is no conversation, nor is a batch with mixed sources.
    await engine.remember_many([{"content": f"imported {i}", "source": "mcp"} for i in range(3)], chain=False)
    await engine.remember_many([{"content": "x one", "source": "a"}, {"content": "x two", "source": "b"}])
    assert links(database_url, "next") == chained


async def test_relates_to_links_nearest_earlier_memories_above_the_floor(engine, database_url):
    first = await engine.remember({"content": "The billing service stores invoices in PostgreSQL"})
    unrelated = await engine.remember({"content": "My cat enjoys sleeping in the sun"})
    second = await engine.remember({"content": "Invoices of the billing service live in PostgreSQL tables"})
    related = links(database_url, "relates_to")
    assert (str(second.id), str(first.id)) in related
    assert all(str(unrelated.id) not in pair for pair in related)
    weight = rows(
        database_url, "SELECT weight FROM memory_links WHERE src = %s AND dst = %s", (second.id, first.id)
    )
    assert weight[0][0] >= GraphConfig().relates_to_min_similarity


async def test_duplicates_are_not_linked_again(engine, database_url):
    a = await engine.remember({"content": "Alice deploys on Fridays"})
    before = rows(database_url, "SELECT count(*) FROM memory_entities")
    again = await engine.remember({"content": "Alice deploys on Fridays"})
    assert again.status == "duplicate" and again.id == a.id
    assert rows(database_url, "SELECT count(*) FROM memory_entities") == before
    assert rows(database_url, "SELECT count(*) FROM memory_linked") == [(1,)]


async def test_same_time_links_are_bounded_per_memory(engine, database_url):
    day = [
        {
            "content": f"event number {i} of the offsite",
            "occurred_at": f"2024-05-08T{8 + i % 10:02d}:{i:02d}:00Z",
        }
        for i in range(12)
    ]
    await engine.remember_many(day)
    await engine.remember({"content": "another day entirely", "occurred_at": "2024-05-09T09:00:00Z"})
    per_src = rows(
        database_url, "SELECT src, count(*) FROM memory_links WHERE kind = 'same_time' GROUP BY src"
    )
    k = GraphConfig().same_time_k
    assert per_src and max(n for _, n in per_src) <= k
    assert sum(n for _, n in per_src) == sum(min(i, k) for i in range(12))  # each to its earlier ones


async def test_a_node_past_per_node_keeps_its_first_links_in_index_order(engine, database_url):
    # Links written in the reverse of their index order: a read with no order returns them as
    # stored, so which ones a bounded read kept depended on the plan.
    created = await engine.remember_many([{"content": f"hub fact number {i}"} for i in range(13)])
    hub, *others = [r.id for r in created]
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_links")
        for src in sorted(others, reverse=True):
            conn.execute(
                "INSERT INTO memory_links (src, dst, kind, weight) VALUES (%s, %s, 'relates_to', 0.7)",
                (src, hub),
            )
    read = await engine.store.memory_edges([hub], kinds=("relates_to",), per_node=5)
    assert [b for _, b, _, _ in read] == sorted(others)[:5]
    # The same under the plan that reads the table in its stored order (a bitmap heap scan).
    sql = graph_reads._READ_SQL["edges"].format(i=0)
    with psycopg.connect(database_url) as conn:
        conn.execute("SET enable_indexscan = off")
        conn.execute("SET enable_indexonlyscan = off")
        found = conn.execute(sql, {"ids0": [hub], "kinds0": ["relates_to"], "n": 5}).fetchall()
    assert [row[2] for row in found] == sorted(others)[:5]


async def test_forget_and_project_deletion_leave_no_orphans(engine, database_url):
    a = await engine.remember_many(
        [{"content": "Caroline met Melanie", "source": "s", "position": i} for i in range(1)]
        + [{"content": "Caroline and Melanie painted", "source": "s", "position": 1}]
    )
    b = await engine.remember({"content": "Zed owns fp-700", "project": "other"})
    await engine.forget(a[0].id)
    assert rows(
        database_url, "SELECT count(*) FROM memory_links WHERE src = %s OR dst = %s", (a[0].id, a[0].id)
    ) == [(0,)]
    assert rows(database_url, "SELECT count(*) FROM memory_entities WHERE memory_id = %s", (a[0].id,)) == [
        (0,)
    ]
    assert rows(database_url, "SELECT count(*) FROM memory_linked WHERE memory_id = %s", (a[0].id,)) == [(0,)]
    await engine.forget(b.id)  # its entities are orphans now: maintain deletes them
    assert rows(database_url, "SELECT count(*) FROM memlane_entities WHERE project = 'other'") == [(2,)]
    [report] = await maintain.maintain(engine, ["links"])
    assert report.summary["orphan_entities_deleted"] == 2
    assert rows(database_url, "SELECT key FROM memlane_entities ORDER BY key") == [
        ("caroline",),
        ("melanie",),
    ]
    assert await engine.store.delete_projects(["default"]) == 1
    for table in ("memlane_entities", "memory_entities", "memory_links", "memory_linked"):
        assert rows(database_url, f"SELECT count(*) FROM {table}") == [(0,)], table


async def test_a_memory_forgotten_while_a_write_links_to_it_keeps_no_link(engine, database_url):
    """The links have no foreign key (migration 0010): a forget waits for the project's writes in
    progress, so a link one of them wrote to the memory goes with it."""
    target = await engine.remember({"content": "The billing service runs on fp-700"})
    source = await engine.remember({"content": "Rollout notes for the invoicing cron job"})
    with psycopg.connect(database_url) as writer:  # a write of the project, not committed yet
        writer.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (WRITE_LOCK_CLASS, "default"))
        writer.execute(
            "INSERT INTO memory_links (src, dst, kind) VALUES (%s, %s, 'causes')", (source.id, target.id)
        )
        forget = asyncio.ensure_future(engine.forget(target.id))
        await asyncio.sleep(0.5)
        assert not forget.done()  # it waits for the write
        writer.commit()
    await forget
    assert rows(
        database_url, "SELECT count(*) FROM memory_links WHERE src = %s OR dst = %s", (target.id, target.id)
    ) == [(0,)]
    assert rows(database_url, "SELECT count(*) FROM memories WHERE id = %s", (source.id,)) == [(1,)]


async def test_update_with_new_content_re_extracts_entities(engine, database_url):
    m = await engine.remember({"content": "Alice prefers tabs", "source": "s", "position": 0})
    n = await engine.remember({"content": "Bob agrees", "source": "s", "position": 1})
    await engine.update(m.id, {"content": "Carol prefers spaces in main.py"})
    assert mentions(database_url, m.id) == {"carol", "main.py"}
    assert (str(m.id), str(n.id)) in links(database_url, "next")  # its place in the source is unchanged
    await engine.update(m.id, {"priority": 5})  # no new content: nothing to redo
    assert mentions(database_url, m.id) == {"carol", "main.py"}


async def test_nearest_many_searches_exactly_or_through_the_index_alike(engine, database_url, monkeypatch):
    """Small projects are searched exactly (a few vectors by the server, a batch read whole and
    searched in numpy), those with their own vector index through HNSW: same answers (on a store
    this small HNSW is exact), expired memories and other projects left out of all three."""
    texts = [f"note {i}: {w} about the {t} service" for i, (w, t) in
             enumerate([(w, t) for w in ("decision", "incident", "question", "plan", "review")
                        for t in ("billing", "search", "login", "mail", "backup", "report")])]  # fmt: skip
    await engine.remember_many([{"content": t, "project": "near"} for t in texts])
    expired = await engine.remember(
        MemoryInput.parse(
            engine.config,
            {
                "content": "note x: decision about the billing service",
                "project": "near",
                "expires_at": "2001-01-01T00:00:00Z",
            },
            restoring=True,  # as an import restores it: a new memory may not expire in the past
        )
    )
    await engine.remember({"content": "note y: decision about the billing service", "project": "elsewhere"})
    queries = engine.embedder.embed_memories(
        ["a decision about billing", "the login incident", "mail backups"]
    )
    from memlane.pipeline.store import maintenance

    exact = await engine.store.nearest_many("near", queries, 4)  # 3 vectors: in SQL
    monkeypatch.setattr(maintenance, "EXACT_IN_SQL_MAX", 2)
    in_numpy = await engine.store.nearest_many("near", queries, 4)
    assert [[m for m, _ in h] for h in exact] == [[m for m, _ in h] for h in in_numpy]
    assert [[round(s, 4) for _, s in h] for h in exact] == [[round(s, 4) for _, s in h] for h in in_numpy]
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 10)
    await engine.store.index_projects({"near", "elsewhere"})  # "elsewhere" holds 1: no index
    with psycopg.connect(database_url) as conn:
        assert [r[0] for r in conn.execute("SELECT project FROM memlane_vector_indexes")] == ["near"]
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT id FROM memories WHERE project = 'near' ORDER BY embedding <=> '{list(queries[0])}' LIMIT 4"
        ))  # fmt: skip
    assert vectors.index_name("near") in plan
    indexed = await engine.store.nearest_many("near", queries, 4, ef_search=200)
    assert [[m for m, _ in hits] for hits in exact] == [[m for m, _ in hits] for hits in indexed]
    for e_hits, i_hits in zip(exact, indexed, strict=True):
        assert len(e_hits) == 4
        assert [round(s, 4) for _, s in e_hits] == [round(s, 4) for _, s in i_hits]
        assert [s for _, s in e_hits] == sorted((s for _, s in e_hits), reverse=True)
        assert expired.id not in {m for m, _ in e_hits}
    assert exact[0][0][1] > exact[0][-1][1]


@pytest.mark.parametrize("index_min", [vectors.PROJECT_INDEX_MIN, 1], ids=["exact", "index"])
async def test_maintain_rebuilds_emptied_graph_tables_identically(
    engine, database_url, monkeypatch, index_min
):
    # The write path finds relates_to neighbours before the insert (exactly, or through the project's
    # HNSW index, made before the second write when index_min is 1), maintain in SQL after it: both
    # must give the same links.
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", index_min)
    convo = [
        {"content": f"{who}: turn {i} about the PyCon talk and node.js", "source": f"s{i // 4}", "position": i % 4,
         "occurred_at": f"2024-05-0{1 + i // 4}T10:{i:02d}:00Z"}
        for i, who in enumerate(["Caroline", "Melanie"] * 6)
    ]  # fmt: skip
    await engine.remember_many(convo)
    await engine.remember_many(
        [{"content": "Caroline likes node.js a lot"}, {"content": "Melanie likes PyCon"}]
    )

    def snapshot():
        return (
            sorted(rows(database_url, "SELECT src, dst, kind, round(weight::numeric, 4) FROM memory_links")),
            sorted(rows(database_url, "SELECT me.memory_id, e.project, e.key, e.name, e.kind FROM memory_entities me"
                                      " JOIN memlane_entities e ON e.id = me.entity_id")),
            sorted(rows(database_url, "SELECT memory_id FROM memory_linked")),
        )  # fmt: skip

    before = snapshot()
    assert before[0] and before[1] and len(before[2]) == 14
    assert bool(rows(database_url, "SELECT project FROM memlane_vector_indexes")) == (index_min == 1)
    with psycopg.connect(database_url) as conn:
        conn.execute("TRUNCATE memory_links, memory_entities, memory_linked, memlane_entities")
    progress = []
    [dry] = await maintain.maintain(engine, ["links"], dry_run=True)
    assert dry.summary["would_link"] == 14
    [report] = await maintain.maintain(engine, ["links"], progress=lambda *a: progress.append(a))
    assert report.summary["linked"] == 14
    assert progress[-1] == ("links", 14, 14)
    assert snapshot() == before
    [again] = await maintain.maintain(engine, ["links"])  # idempotent: nothing left to do
    assert again.summary["linked"] == 0 and snapshot() == before


# -- the graph arm -----------------------------------------------------------------------------------


async def seed_conversation(engine):
    """A two-hop question: the answer never names the question's words, only its neighbour does."""
    await engine.remember_many(
        [
            {
                "content": "Caroline: I adopted a dog from the shelter last week",
                "source": "s1",
                "position": 0,
            },
            {"content": "Melanie: what is its name?", "source": "s1", "position": 1},
            {"content": "Caroline: Biscuit, after my favourite snack", "source": "s1", "position": 2},
        ]
        + [
            {
                "content": f"Melanie: unrelated chatter number {i} about painting",
                "source": "s2",
                "position": i,
            }
            for i in range(20)
        ]
    )


async def test_the_graph_arm_runs_is_traced_and_bounded_by_the_budget(engine):
    await seed_conversation(engine)
    expanded = {}
    for budget in ("low", "high"):
        # Twenty memories share the question's rare word: entry points enough to spend any budget.
        res = await engine.recall(
            dict(query="What was the chatter about painting?", budget=budget, explain=True)
        )
        retrieval = next(s for s in res.trace.stages if s.stage == "retrieval")
        assert "graph" in retrieval.detail["arms"]
        g = retrieval.detail["graph"]
        assert g["method"] == "mpfp" and g["max_expanded"] == engine.config.graph.expand(budget)
        assert g["entry_points_from"] == "keyword" and g["entry_points"] == engine.config.graph.entry_points
        assert 0 < g["expanded"] <= g["max_expanded"]
        expanded[budget] = g["expanded"]
    assert expanded["low"] <= engine.config.graph.expand_low < expanded["high"]


async def test_the_graph_starts_from_the_keyword_hits_or_after_the_other_arms_when_there_are_none(engine):
    """With keyword hits, the graph's entry points are the best of them (its reads run while the
    question is embedded); a question sharing no word with the store starts it from the fused hits
    of the other arms, after they ran."""
    await seed_conversation(engine)
    traced = {}
    for question in ("What did Caroline adopt from the shelter?", "Which pet joined the household?"):
        res = await engine.recall(dict(query=question, explain=True))
        traced[question] = next(s for s in res.trace.stages if s.stage == "retrieval").detail
    by_words = traced["What did Caroline adopt from the shelter?"]
    assert by_words["graph"]["entry_points_from"] == "keyword"
    assert 0 < by_words["graph"]["entry_points"] <= by_words["arms"]["keyword"]
    no_words = traced["Which pet joined the household?"]
    assert "keyword" not in no_words["arms"]
    assert no_words["graph"]["entry_points_from"] == "fused"
    assert no_words["graph"]["entry_points"] == engine.config.graph.entry_points


async def test_graph_hits_carry_exact_scores_of_the_store_arms(engine):
    await seed_conversation(engine)
    # Two hits per arm (a recall's limit raises its arms' k: RecallConfig.per_arm).
    req = RecallQuery.parse(engine.config, dict(query="What did Caroline adopt from the shelter?", limit=2))
    config = engine.config.model_copy(
        update={"recall": engine.config.recall.model_copy(update={"candidates_per_arm": 2})}
    )
    ctx = RecallContext(config=config, store=engine.store, embedder=engine.embedder, llm=None, request=req)
    query = Query(text=req.query, intent=analyse_offline(req.query))
    retrieved = (await retrieve(ctx, query)).value
    graph = {str(m.id): m.content for m, _ in retrieved.lists["graph"]}
    neighbour = next(k for k, c in graph.items() if c == "Melanie: what is its name?")
    # Scored exactly on the store arms (for fusion and the floor), though not in their lists.
    assert {"graph", "vector", "keyword"} <= set(retrieved.scores[neighbour])
    assert all(str(m.id) != neighbour for m, _ in retrieved.lists["vector"])


@pytest.mark.parametrize(("limit", "hits"), [(2, 4), (6, 6)])
async def test_the_graph_arm_adds_at_most_max_hits_or_the_recall_s_limit(
    engine_config, open_engine, limit, hits
):
    """graph.max_hits bounds the graph's own list, whatever recall.candidates_per_arm is; a recall
    asking for more memories than it gets that many (two entry points reach six turns or more)."""
    config = engine_config.model_copy(
        update={
            "graph": engine_config.graph.model_copy(update={"max_hits": 4, "entry_points": 2}),
            "recall": engine_config.recall.model_copy(update={"candidates_per_arm": 2}),
        }
    )
    eng = await open_engine(config)
    await eng.remember_many(
        [
            {"content": f"Turn {i}: the lighthouse keeper logged storm {i}", "source": "s", "position": i}
            for i in range(30)
        ]
    )
    req = RecallQuery.parse(eng.config, dict(query="What did the lighthouse keeper log?", limit=limit))
    ctx = RecallContext(config=config, store=eng.store, embedder=eng.embedder, llm=None, request=req)
    retrieved = (await retrieve(ctx, Query(text=req.query, intent=analyse_offline(req.query)))).value
    assert len(retrieved.lists["graph"]) == hits


async def test_graph_off_and_mpfp(engine):
    await seed_conversation(engine)
    q = "What did Caroline adopt from the shelter?"
    engine.config = engine.config.model_copy(
        update={"recall": engine.config.recall.model_copy(update={"graph": "off"})}
    )
    res = await engine.recall(dict(query=q, explain=True))
    retrieval = next(s for s in res.trace.stages if s.stage == "retrieval")
    assert "graph" not in retrieval.detail["arms"] and retrieval.detail["graph"]["method"] == "off"
    engine.config = engine.config.model_copy(
        update={"recall": engine.config.recall.model_copy(update={"graph": "mpfp"})}
    )
    res = await engine.recall(dict(query=q, explain=True))
    retrieval = next(s for s in res.trace.stages if s.stage == "retrieval")
    g = retrieval.detail["graph"]
    assert g["method"] == "mpfp" and "graph" in retrieval.detail["arms"]
    assert g["paths"].get("next", 0) > 0 and 0 < g["expanded"] <= g["max_expanded"]


async def test_the_graph_arm_stays_in_its_project(engine):
    await seed_conversation(engine)
    await engine.remember_many(
        [
            {
                "content": "Caroline: my dog Biscuit loves the park",
                "project": "other",
                "source": "x",
                "position": 0,
            }
        ]
    )
    res = await engine.recall(dict(query="What did Caroline adopt?", limit=50))
    assert all(m.project == "default" for m, _ in res.memories)


# -- recall output extras ----------------------------------------------------------------------------


async def test_include_context_returns_neighbours_within_the_budget(engine):
    await seed_conversation(engine)
    q = "What did Caroline adopt from the shelter?"
    res = await engine.recall(dict(query=q, limit=1, include_context=True))
    [view] = res.rendered["memories"]
    assert view["content"] == "Caroline: I adopted a dog from the shelter last week"
    assert view["context"] == [
        {"id": view["context"][0]["id"], "content": "Melanie: what is its name?", "position": 1}
    ]
    assert len(view["context"][0]["id"]) >= 8
    plain = await engine.recall(dict(query=q, limit=1))
    assert "context" not in plain.rendered["memories"][0]
    # A tight budget: the context gives way, the result stays within max_tokens.
    for max_tokens in (60, 80, 120, 400):
        res = await engine.recall(dict(query=q, limit=3, max_tokens=max_tokens, include_context=True))
        assert res.tokens_used <= max_tokens
        assert count_tokens(render.to_text(res.rendered)) == res.tokens_used


async def test_include_entities_returns_other_facts_about_the_entities(engine):
    await engine.remember_many(
        [
            {"content": "Melanie adopted a cat named Luna from the PetPal shelter"},
            {"content": "PetPal shelter closes on Sundays"},
            {"content": "PetPal shelter was founded by Ada Lovelace in 2019"},
            {"content": "Unrelated: the weather was nice"},
        ]
    )
    res = await engine.recall(dict(query="What did Melanie adopt?", limit=1, include_entities=True))
    assert res.rendered["memories"][0]["content"].startswith("Melanie adopted a cat")
    entities = {e["name"]: e["facts"] for e in res.rendered["entities"]}
    assert set(entities["PetPal"]) == {
        "PetPal shelter closes on Sundays",
        "PetPal shelter was founded by Ada Lovelace in 2019",
    }
    assert res.tokens_used <= engine.config.recall.default_max_tokens
    small = await engine.recall(
        dict(query="What did Melanie adopt?", limit=1, max_tokens=70, include_entities=True)
    )
    assert small.tokens_used <= 70
    with pytest.raises(InvalidInput, match="include_entities"):
        RecallQuery.parse(engine.config, dict(query="x", include_entities="yes"))


async def test_the_recall_tool_takes_include_context_and_include_entities(engine, connect):
    await seed_conversation(engine)
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        props = tools["recall"].input_schema["properties"]
        assert {"include_context", "include_entities"} <= set(props)
        r = await client.call_tool(
            "recall",
            {"query": "What did Caroline adopt from the shelter?", "limit": 1, "include_context": True},
        )
        assert r.is_error is False, r.content[0].text
        [view] = r.structured_content["memories"]
        assert view["context"][0]["content"] == "Melanie: what is its name?"


# -- LLM extraction on the write path (ScriptedLLM stands in for a paid API) --------------------------


async def test_an_llm_extractor_adds_entities_and_causes_links(engine_config, embedder, database_url):
    import json

    from support.llm_fakes import ScriptedLLM, failing

    llm = ScriptedLLM()
    off = Engine(engine_config, embedder=embedder, llm=llm)  # the stage is off unless enabled
    await off.open()
    try:
        await off.remember({"content": "Nothing to extract here"})
        assert llm.calls_for("extract") == []
    finally:
        await off.close()
    stages = engine_config.llm.stages.model_copy(update={"extract": LLMStageConfig(enabled=True)})
    engine_config = engine_config.model_copy(
        update={"llm": engine_config.llm.model_copy(update={"stages": stages})}
    )
    eng = Engine(engine_config, embedder=embedder, llm=llm)
    await eng.open()
    try:
        cause = await eng.remember(
            {"content": "We changed the connection pool size of the billing service to 2"}
        )
        llm.enqueue(
            "extract",
            json.dumps(
                {"entities": [{"name": "billing service", "kind": "term"}], "caused_by": [1], "causes": [7]}
            ),
        )
        effect = await eng.remember(
            {"content": "The billing service connection pool ran out and requests timed out"}
        )
        [call] = [c for c in llm.calls_for("extract") if "ran out" in c["user"]]
        assert "[1] We changed the connection pool size" in call["user"]  # the earlier memory, numbered
        assert (str(cause.id), str(effect.id)) in links(database_url, "causes")
        assert "billing service" in mentions(database_url, effect.id)
        # A failing LLM costs the extras only: the memory and its offline links are stored.
        llm.enqueue("extract", failing("HTTP 503"))
        third = await eng.remember({"content": "Billing service pool size restored to 20 by Alice"})
        assert third.status == "created" and "alice" in mentions(database_url, third.id)
    finally:
        await eng.close()


def test_extract_replies_are_checked():
    from uuid import uuid4

    from memlane.pipeline.providers.llm.base import LLMError
    from memlane.pipeline.remember.extract import parse_reply

    me, a, b = uuid4(), uuid4(), uuid4()
    entities, pairs = parse_reply(
        {
            "entities": [{"name": "Ada's", "kind": "bogus"}, "x", {"name": " "}],
            "caused_by": [2, 0, True, "1"],
            "causes": [1],
        },
        [a, b],
        me,
    )
    assert entities == [Entity("ada", "Ada's", "name")]
    assert pairs == [(b, me), (me, a)]
    with pytest.raises(LLMError):
        parse_reply(["not", "an", "object"], [], me)


# -- the graph arm's scale ---------------------------------------------------------------------------


def names_only(engine_config):
    """A config whose writes link no similar or same-day memories: only names and next/previous."""
    return engine_config.model_copy(update={"graph": GraphConfig(relates_to_k=0, same_time_k=0)})


async def chained_store(engine_config, open_engine):
    """Two conversations, linked by next/previous and one name only (no similarity or same-day links)."""
    eng = await open_engine(names_only(engine_config))
    turns = [
        ("s1", 0, "the first turn, about painting"),
        ("s1", 1, "the second turn, where Zephyrine speaks"),
        ("s1", 2, "the third turn, Zephyrine again on gardening"),
        ("s1", 3, "the fourth turn, about cooking"),
        ("s2", 0, "a weak entry point"),
        ("s2", 1, "its only neighbour"),
    ]
    done = await eng.remember_many([{"content": c, "source": s, "position": p} for s, p, c in turns])
    return eng, [r.id for r in done]


async def test_the_graph_score_is_the_activation_that_reached_a_memory(engine_config, open_engine):
    eng, (a0, a1, a2, a3, b0, b1) = await chained_store(engine_config, open_engine)
    strong, weak = 0.8, 0.25
    loader = graph._Loader(eng.store, "default", eng.config.graph)
    scores, info = await graph.mpfp(loader, {a1: strong, b0: weak}, {}, 100, eng.config.graph)
    alpha = graph.PUSH_ALPHA
    assert info["paths"] == {"entity": 1, "next": 3, "next2": 4}
    # a1's activation splits between its two neighbours; on next2 each of them keeps alpha of its
    # share and passes the rest on, never back to a1: a3 is two hops away.
    assert scores[a0] == pytest.approx(strong / 2 * (1 + alpha))
    assert scores[a3] == pytest.approx((1 - alpha) * strong / 4)
    # a2 is also reached through the name it shares with a1: two kinds of path agree, it gets more.
    assert scores[a2] == pytest.approx(scores[a0] + (1 - alpha) * strong / 2)
    assert scores[a2] > scores[a0] > scores[a3]
    # The only neighbour of a weak entry point gets that entry point's activation, not the full scale.
    assert scores[b1] == pytest.approx(weak * (1 + alpha))
    assert scores[b1] < scores[a0]
    # Nothing comes back to an entry point along a path it started.
    assert a1 not in scores and b0 not in scores
    assert all(0.0 < s <= 1.0 for s in scores.values())


async def test_the_paths_read_a_shared_hop_once_and_score_as_when_run_one_by_one(
    engine_config, open_engine, monkeypatch
):
    """The meta-paths run in step, each depth's hops of every path one statement; ``next`` and
    ``next2`` start from the same frontier, whose links are read once. The scores are those of the
    paths run one after another."""
    eng, (a0, a1, a2, a3, b0, b1) = await chained_store(engine_config, open_engine)
    seeds, cfg = {a1: 0.8, b0: 0.25}, eng.config.graph
    statements: list[list[tuple[str, tuple[str, ...]]]] = []
    real = eng.store.graph_reads

    async def counted(reads, **kw):
        statements.append(sorted((r.what, r.kinds) for r in reads))
        return await real(reads, **kw)

    monkeypatch.setattr(eng.store, "graph_reads", counted)
    loader = graph._Loader(eng.store, "default", cfg)
    together, _ = await graph.mpfp(loader, seeds, {}, 100, cfg)
    # Depth 1: the entry points' mentions, relates_to links and next links (once for next and
    # next2); depth 2: next2's second hop (the entity path's members only if an entity is shared).
    assert statements[0] == [("edges", ("next",)), ("edges", ("relates_to",)), ("mentions", ())]
    assert ("edges", ("next",)) in statements[1]
    assert len(statements) == 2 and loader.queries == 2
    monkeypatch.setattr(eng.store, "graph_reads", real)
    paths, alone = dict(graph.META_PATHS), {}
    for name, path in paths.items():  # each path by itself
        monkeypatch.setattr(graph, "META_PATHS", {name: path})
        scores, _ = await graph.mpfp(graph._Loader(eng.store, "default", cfg), seeds, {}, 100, cfg)
        for m, v in scores.items():
            alone[m] = alone.get(m, 0.0) + v
    assert together.keys() == alone.keys()
    assert all(together[m] == pytest.approx(min(alone[m], 1.0)) for m in alone)


async def test_mention_counts_stop_past_what_the_graph_arm_asks(engine):
    """An entity's mention count is read up to max_entity_degree + 1: enough to tell a hub (not
    expanded) from a specific entity, whose count (its weight) stays exact."""
    await engine.remember_many(
        [{"content": f"Zephyrine checked the build number {i}"} for i in range(6)]
        + [{"content": "Quillon fixed the flaky login test"}, {"content": "Quillon paired on the cache"}],
        chain=False,
    )
    store = engine.store
    [(zid, _)] = (await store.entity_ids("default", ["zephyrine"])).items()
    [(qid, _)] = (await store.entity_ids("default", ["quillon"])).items()
    [members] = await store.graph_reads(
        [GraphRead("members", (zid, qid))], project="default", per_node=50, count_up_to=4
    )
    counts = {e: n for e, _, n in members}
    assert counts == {zid: 4, qid: 2}
    assert sum(1 for e, _, _ in members if e == zid) == 6  # the members themselves are not capped
    ids = [m for e, m, _ in members]
    [mentions] = await store.graph_reads([GraphRead("mentions", tuple(ids))], count_up_to=4)
    assert {(e, n) for _, e, n in mentions if e in (zid, qid)} == {(zid, 4), (qid, 2)}
    [mentions] = await store.graph_reads([GraphRead("mentions", tuple(ids))], count_up_to=100)
    assert {(e, n) for _, e, n in mentions if e in (zid, qid)} == {
        (zid, 6),
        (qid, 2),
    }


async def test_fusion_adds_the_graph_score_times_its_weight_not_the_best_of_the_query(
    engine_config, open_engine
):
    """A small store linked by one name only: the graph's one hit is a weak one."""
    eng = await open_engine(names_only(engine_config))
    await eng.remember_many(
        [
            {"content": "We decided with Priya that releases go out on Tuesdays"},
            {"content": "We decided to move the billing API to PostgreSQL 16"},
            {"content": "We decided to drop the Redis cache for user sessions"},
            {"content": "Priya joined the platform team as tech lead"},
            {"content": "Sam is allergic to peanuts"},
        ],
        chain=False,
    )
    req = RecallQuery.parse(eng.config, dict(query="What did we decide?"))
    ctx = RecallContext(config=eng.config, store=eng.store, embedder=eng.embedder, llm=None, request=req)
    retrieved = (await retrieve(ctx, Query(text=req.query, intent=analyse_offline(req.query)))).value
    weights = eng.config.recall.arm_weights
    fused = {c.memory.id: c for c in score_fusion(retrieved, weights)}
    graph_scores = {m.id: s for m, s in retrieved.lists["graph"]}
    assert graph_scores and all(0.0 < s <= 1.0 for s in graph_scores.values())
    best = max(graph_scores.values())
    assert best < 1.0  # weak evidence: even this query's best graph hit is not worth the full weight
    best_keyword = max(s.get("keyword", 0.0) for s in retrieved.scores.values())
    for mid, g in graph_scores.items():
        s = retrieved.scores[str(mid)]
        keyword = s.get("keyword", 0.0) / best_keyword if best_keyword > 0 else 0.0
        expected = weights["vector"] * s.get("vector", 0.0) + weights["keyword"] * keyword
        assert fused[mid].score == pytest.approx(expected + weights["graph"] * g)


async def test_ingest_links_related_pieces_as_maintain_rebuilds_them(engine, database_url):
    """ingest hands its novelty search's neighbours to the write path: the relates_to links it makes
    are the ones maintain makes from scratch."""
    await engine.remember_many(
        [
            {"content": "The billing service stores invoices in PostgreSQL 16"},
            {"content": "Billing invoices moved from MySQL to PostgreSQL"},
            {"content": "PostgreSQL holds every invoice of the billing service"},
        ],
        chain=False,
    )
    text = "\n".join(
        [
            "Dana: We keep the billing invoices in a PostgreSQL database now.",
            "Sam: Did the invoice tables move over cleanly from MySQL last week?",
            "Dana: Two invoices had broken totals after the PostgreSQL move.",
            "Sam: My cat has been sleeping in the sun all afternoon.",
        ]
    )
    out = await engine.ingest({"text": text, "kind": "conversation", "source": "chat-7"})
    assert out.counts["stored"] == 4
    before = links(database_url, "relates_to")
    assert before  # the billing pieces relate to each other and to the stored memory
    with psycopg.connect(database_url) as conn:
        conn.execute("TRUNCATE memory_links, memory_entities, memory_linked, memlane_entities")
    await maintain.maintain(engine, ["links"])
    assert links(database_url, "relates_to") == before


@pytest.mark.parametrize("method", ["mpfp", "activation"])
async def test_an_explained_recall_traces_the_entry_points_and_paths_of_each_graph_hit(engine, method):
    await seed_conversation(engine)
    engine.config = engine.config.model_copy(
        update={"recall": engine.config.recall.model_copy(update={"graph": method})}
    )
    q = "What did Caroline adopt from the shelter?"
    res = await engine.recall(dict(query=q, explain=True))
    retrieval = next(s for s in res.trace.stages if s.stage == "retrieval")
    reached, hits = retrieval.detail["graph"]["reached"], retrieval.detail["hits"]
    graph_ids = [i for i, _ in hits["graph"]]
    assert graph_ids and set(graph_ids) <= set(reached)
    ways = [w for i in graph_ids for w in reached[i]]
    assert ways and all(w["from"].startswith(("memory ", "entity ")) and w["mass"] > 0 for w in ways)
    paths = {w["path"] for w in ways}
    assert paths <= set(graph.META_PATHS) if method == "mpfp" else paths == {"activation"}
    assert {"vector", "keyword", "graph"} <= set(hits)  # every arm's own list, ranked
    plain = await engine.recall(dict(query=q))  # not explained: nothing more is kept
    retrieval = next(s for s in plain.trace.stages if s.stage == "retrieval")
    assert "reached" not in retrieval.detail["graph"] and "hits" not in retrieval.detail
