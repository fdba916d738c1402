"""One HNSW index per project (pipeline/store/vectors.py), against the real embedded PostgreSQL."""

import psycopg
import pytest

from memlane.pipeline.engine import Engine
from memlane.pipeline.store import vectors

pytestmark = pytest.mark.anyio


def _vector_indexes(database_url) -> tuple[set[str], set[str]]:
    """(indexed projects in the registry, hnsw indexes on memories)."""
    with psycopg.connect(database_url) as conn:
        registry = {r[0] for r in conn.execute("SELECT project FROM memlane_vector_indexes")}
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memories' AND indexdef LIKE '%%hnsw%%'"
            )
        }
    return registry, indexes


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
    res = await engine.recall(engine.recall_request("the login plan", project=odd))
    assert res.memories[0][0].content == "note 2 about the login plan"
    res = await engine.recall(engine.recall_request("a note", project="small"))
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
    # Put the store back as it was before migration 0008: one index over every project.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {vectors.index_name('big')}")
        conn.execute("DROP TABLE memlane_vector_indexes")
        conn.execute("DELETE FROM memlane_migrations WHERE version = 8")
        conn.execute(
            f"CREATE INDEX {vectors.GLOBAL_INDEX} ON memories USING hnsw (embedding vector_cosine_ops)"
        )
    eng = Engine(engine_config, embedder=embedder)
    await eng.open()
    try:
        assert _vector_indexes(database_url) == ({"big"}, {vectors.index_name("big")})
        res = await eng.recall(eng.recall_request("big note 3", project="big"))
        assert res.memories[0][0].content == "big note 3"
        # Switching the model (reembed) clears the vectors and keeps one index per indexed project.
        await eng.store.switch_model(embedder.model_id, embedder.dim)
        assert _vector_indexes(database_url) == ({"big"}, {vectors.index_name("big")})
    finally:
        await eng.close()
