"""One HNSW index per project (pipeline/store/vectors.py), against the real embedded PostgreSQL."""

import psycopg
import pytest

from memlane.pipeline.engine import Engine
from memlane.pipeline.recall.query import Ablation
from memlane.pipeline.request import Filters
from memlane.pipeline.store import vectors

pytestmark = pytest.mark.anyio


def _vector_indexes(database_url, method: str = "hnsw") -> tuple[set[str], set[str]]:
    """(indexed projects in the registry, the indexes on memories.tsv or with ``method``)."""
    with psycopg.connect(database_url) as conn:
        registry = {r[0] for r in conn.execute("SELECT project FROM memlane_vector_indexes")}
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND indexdef LIKE %s",
                ("%(tsv)%" if method == "tsv" else f"%USING {method}%",),
            )
        }
    return registry, indexes


def _keyword_plan(database_url, project: str, query: str) -> str:
    """The plan of the keyword arm's candidate query (store/search.py), with the b-tree indexes on
    memories out of the way (in a transaction rolled back): a store this small is read off them."""
    from memlane.pipeline.store.search import QUERY_CTES, SQL_ARMS, KeywordBounds, SearchQueries

    where, params = SearchQueries._where(Filters(projects=(project,)), query, KeywordBounds(common_df=1.0))
    with psycopg.connect(database_url) as conn:
        conn.execute("SET enable_seqscan = off")
        for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND indexdef LIKE '%%USING btree%%'"
            " AND indexname <> 'memories_pkey'"
        ).fetchall():
            conn.execute(f"DROP INDEX {name}")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                f"EXPLAIN WITH {QUERY_CTES} {SQL_ARMS['keyword'].select.format(where=where, k=5)}", params
            )
        )
        conn.rollback()
    return plan


def _plan(database_url, project: str, vector: list[float]) -> str:
    """The plan of a top 5, the index preferred wherever it is usable (a store this small would be
    read whole anyway)."""
    with psycopg.connect(database_url) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        return "\n".join(
            r[0]
            for r in conn.execute(
                f"EXPLAIN SELECT id FROM memories WHERE {vectors.project_is('project', project)}"
                " ORDER BY embedding <=> %s::vector LIMIT 5",
                (str(list(vector)),),
            )
        )


async def test_a_project_gets_its_index_once_it_is_big_enough_and_recall_uses_it(
    engine, database_url, monkeypatch
):
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 4)
    odd = "it's 100% {done}"  # quotes, percent and braces in the name end up in SQL text
    await engine.remember_many([{"content": f"note {i} about the {w} plan", "project": odd}
                                for i, w in enumerate(["billing", "search", "login"])])  # fmt: skip
    await engine.remember({"content": "one note elsewhere", "project": "small"})
    assert _vector_indexes(database_url) == (set(), set())  # 3 memories: searched exactly
    await engine.remember({"content": "note 3 about the mail plan", "project": odd})
    assert _vector_indexes(database_url) == (set(), set())  # counted before this write: still 3
    await engine.remember({"content": "note 4 about the backup plan", "project": odd})
    assert _vector_indexes(database_url) == ({odd}, {vectors.index_name(odd)})
    query = engine.embedder.embed_query("the login plan")
    assert vectors.index_name(odd) in _plan(database_url, odd, query)
    assert vectors.index_name(odd) not in _plan(database_url, "small", query)
    # Its full-text index too, which the keyword arm reads; the small project is read off its b-tree.
    assert _vector_indexes(database_url, "tsv") == ({odd}, {vectors.text_index_name(odd)})
    assert vectors.text_index_name(odd) in _keyword_plan(database_url, odd, "login plan")
    assert "memories_tsv_" not in _keyword_plan(database_url, "small", "login plan")
    res = await engine.recall(dict(query="the login plan", project=odd))
    assert res.memories[0][0].content == "note 2 about the login plan"
    res = await engine.recall(dict(query="a note", project="small"))
    assert [m.content for m, _ in res.memories] == ["one note elsewhere"]  # no other project's memory


async def test_a_store_with_one_index_for_every_project_gets_one_per_project_on_open(
    engine_config, embedder, database_url, monkeypatch
):
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 3)
    eng = Engine(engine_config, embedder=embedder)
    await eng.open()
    try:
        await eng.remember_many([{"content": f"big note {i}", "project": "big"} for i in range(5)])
        await eng.remember_many([{"content": f"small note {i}", "project": "small"} for i in range(2)])
        await eng.remember({"content": "big note 5", "project": "big"})  # the index comes before this one
    finally:
        await eng.close()
    assert _vector_indexes(database_url) == ({"big"}, {vectors.index_name("big")})
    # Put the store back as it was before migration 0008: one index of each kind over every project.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {vectors.index_name('big')}")
        conn.execute(f"DROP INDEX {vectors.text_index_name('big')}")
        conn.execute("DROP TABLE memlane_vector_indexes")
        conn.execute("DELETE FROM memlane_migrations WHERE version >= 8")
        conn.execute(
            f"CREATE INDEX {vectors.GLOBAL_INDEX} ON memories USING hnsw (embedding vector_cosine_ops)"
        )
        conn.execute("CREATE INDEX memories_tsv ON memories USING gin (tsv)")
    eng = Engine(engine_config, embedder=embedder)
    await eng.open()
    try:
        assert _vector_indexes(database_url) == ({"big"}, {vectors.index_name("big")})
        assert _vector_indexes(database_url, "tsv") == ({"big"}, {vectors.text_index_name("big")})
        res = await eng.recall(dict(query="big note 3", project="big"))
        assert res.memories[0][0].content == "big note 3"
        # Switching the model (reembed) clears the vectors and keeps one index per indexed project.
        await eng.store.switch_model(embedder.model_id, embedder.dim)
        assert _vector_indexes(database_url) == ({"big"}, {vectors.index_name("big")})
        assert _vector_indexes(database_url, "tsv") == ({"big"}, {vectors.text_index_name("big")})
    finally:
        await eng.close()


async def test_migration_0009_gives_indexed_projects_the_full_text_index_python_names(
    engine_config, embedder, database_url, monkeypatch
):
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 3)
    odd = "café 'ops' 100%"  # the SQL digest of a name with non-ASCII, quotes and % is Python's
    eng = Engine(engine_config, embedder=embedder)
    await eng.open()
    try:
        await eng.remember_many([{"content": f"deploy note {i}", "project": odd} for i in range(4)])
        await eng.remember({"content": "deploy note 4", "project": odd})
    finally:
        await eng.close()
    # Back to schema 8: the project has its vector index, the full-text index covers every project.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {vectors.text_index_name(odd)}")
        conn.execute("DELETE FROM memlane_migrations WHERE version >= 9")
        conn.execute("CREATE INDEX memories_tsv ON memories USING gin (tsv)")
    assert _vector_indexes(database_url, "tsv") == ({odd}, {"memories_tsv"})
    eng = Engine(engine_config, embedder=embedder)
    await eng.open()
    try:
        assert _vector_indexes(database_url, "tsv") == ({odd}, {vectors.text_index_name(odd)})
        res = await eng.recall(dict(query="deploy note 2", project=odd, ablation=Ablation(arms=("keyword",))))
        assert res.memories[0][0].content == "deploy note 2"
    finally:
        await eng.close()


def _plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", ()):
        yield from _plan_nodes(child)


async def test_the_union_statement_s_generic_plan_expects_k_candidates_per_arm(
    engine, database_url, monkeypatch
):
    """The arms' LIMIT is in the statement's text (store/search.py): a prepared statement's generic
    plan (the pool's plan_cache_mode) then expects k candidates per arm. With a parameter LIMIT it
    guessed a tenth of the project, and in a project of 24,000 memories the union then read the
    whole table (45 ms where its index gives 2)."""
    import re

    import psycopg as pg

    await engine.remember_many(
        [{"content": f"note {i}: the billing service moved", "project": "p"} for i in range(400)]
    )
    with pg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    sent: list[str] = []
    execute = pg.AsyncCursor.execute

    async def spy(self, query, params=None, **kw):
        sent.append(query)
        return await execute(self, query, params, **kw)

    monkeypatch.setattr(pg.AsyncCursor, "execute", spy)
    vec = engine.embedder.embed_query("billing")
    await engine.store.search(filters=Filters(projects=("p",)), text="billing moved", embedding=vec, k=10)
    monkeypatch.undo()
    [union] = [q for q in sent if isinstance(q, str) and " UNION " in q]
    names: list[str] = []

    def placeholder(m) -> str:
        if m.group(1) not in names:
            names.append(m.group(1))
        return f"${names.index(m.group(1)) + 1}"

    generic = re.sub(r"%\((\w+)\)[sb]", placeholder, union)
    with pg.connect(database_url) as conn:
        [[plan]] = conn.execute("EXPLAIN (GENERIC_PLAN, FORMAT JSON) " + generic).fetchone()
    limits = [n for n in _plan_nodes(plan["Plan"]) if n["Node Type"] == "Limit"]
    # The vector arm's three (its memories' top k, its passages' top k, their union's) and the
    # keyword arm's.
    assert len(limits) == 4
    assert all(n["Plan Rows"] <= 10 for n in limits), [n["Plan Rows"] for n in limits]


async def test_an_indexed_project_s_passages_are_searched_through_their_own_index(
    engine, database_url, monkeypatch
):
    from memlane.pipeline.store.search import SQL_ARMS, KeywordBounds, SearchQueries

    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 2)
    long = "assistant: " + " ".join(["Keep the build green and the tests fast."] * 60)
    await engine.remember_many(
        [{"content": long, "project": "big"}, {"content": "user: hi", "project": "big"}]
    )
    await engine.remember({"content": "user: and another", "project": "big"})
    with psycopg.connect(database_url) as conn:
        indexes = {
            r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memory_passages'")
        }
    assert vectors.passages_index_name("big") in indexes
    where, params = SearchQueries._where(Filters(projects=("big",)), "tests", KeywordBounds())
    params["emb"] = str(list(engine.embedder.embed_query("fast tests")))
    sql = SQL_ARMS["vector"].query(where, 5, "big").replace("%(emb)b", "%(emb)s::vector")
    with psycopg.connect(database_url) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
    assert vectors.passages_index_name("big") in plan
