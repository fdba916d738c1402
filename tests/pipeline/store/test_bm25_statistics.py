"""The keyword arm's BM25 statistics stay exact under every kind of write, including concurrent ones."""

import asyncio

import psycopg
import pytest

from memlane.pipeline.engine import Engine

pytestmark = pytest.mark.anyio

RECOMPUTED = """
SELECT project, u.lexeme, count(*) FROM memories, unnest(tsv) AS u GROUP BY 1, 2
"""


def assert_statistics_exact(database_url):
    with psycopg.connect(database_url) as conn:
        kept = {(p, lx): df for p, lx, df in conn.execute("SELECT project, lexeme, df FROM memlane_lexemes")}
        truth = {(p, lx): df for p, lx, df in conn.execute(RECOMPUTED)}
        projects = dict(conn.execute("SELECT project, docs FROM memlane_projects").fetchall())
        docs = dict(conn.execute("SELECT project, count(*) FROM memories GROUP BY 1").fetchall())
        lengths = dict(conn.execute("SELECT project, lexemes FROM memlane_projects").fetchall())
        true_lengths = dict(
            conn.execute("SELECT project, sum(length(tsv)) FROM memories GROUP BY 1").fetchall()
        )
    assert kept == truth
    assert projects == docs
    assert lengths == true_lengths


async def test_statistics_follow_inserts_updates_and_deletes(engine, database_url):
    a = await engine.remember({"content": "The deploy pipeline uses GitHub Actions", "project": "ops"})
    await engine.remember({"content": "Deploys are frozen during the holidays", "project": "ops"})
    await engine.remember({"content": "The deploy of the billing service failed twice", "project": "billing"})
    await engine.update(a.id, {"content": "The deploy pipeline moved to Buildkite"})
    await engine.update(a.id, {"tags": ["ci"]})  # no text change: statistics untouched
    await engine.forget(a.id)
    assert_statistics_exact(database_url)
    for m in list((await engine.recall(dict(query="deploy", project="billing"))).memories):
        await engine.forget(m[0].id)
    assert_statistics_exact(database_url)  # the emptied project leaves no statistics rows


async def test_concurrent_batches_with_shared_words_neither_deadlock_nor_drift(
    engine_config, embedder, database_url
):
    engines = [Engine(engine_config, embedder=embedder) for _ in range(3)]
    for e in engines:
        await e.open()
    words = ["deploy", "release", "incident", "database", "review", "python", "budget", "design"]

    async def writer(n: int, eng: Engine):
        for batch in range(4):
            items = [
                {
                    "content": f"Writer {n} batch {batch}: {words[(i + n) % 8]} {words[(i * 3 + batch) % 8]} note {i}",
                    "project": "shared",
                }
                for i in range(25)
            ]
            await eng.remember_many(items)

    await asyncio.wait_for(asyncio.gather(*(writer(n, e) for n, e in enumerate(engines))), timeout=120)
    assert (await engines[0].stats())["projects"]["shared"] == 3 * 4 * 25
    assert_statistics_exact(database_url)
    for e in engines:
        await e.close()


async def test_rare_words_outweigh_words_every_memory_has(engine):
    # "Alice" is in every memory, so BM25's idf makes the rare word decide the ranking.
    for i in range(20):
        await engine.remember({"content": f"Alice: note number {i} about the weather"})
    await engine.remember({"content": "Alice: my sister adopted a greyhound"})
    res = await engine.recall(dict(query="Alice greyhound", limit=1))
    assert res.memories[0][0].content == "Alice: my sister adopted a greyhound"


async def test_inline_bm25_equals_the_reference_function(engine, database_url):
    # The keyword arm scores with an inline form of migration 0002's memlane_bm25 (store/search.py);
    # repeated words (tf > 1), words the query lacks and lengths far from the average all count.
    from memlane.pipeline.store.search import BM25, QUERY_CTES

    texts = [
        "Deploy deploy deploy: the deploy pipeline failed on Friday",
        "The billing team reviews the deploy checklist every week with Priya",
        "Priya prefers tmux",
        "A long note about the weather, the garden, the holidays, the dog and an unrelated deploy",
        "Nothing in common here",
    ]
    for t in texts:
        await engine.remember({"content": t, "project": "bm"})
    query = "who reviews the deploy pipeline checklist, Priya?"
    sql = (
        f"WITH {QUERY_CTES} SELECT m.content, {BM25},"
        " memlane_bm25(m.tsv, qidf.lexemes, qidf.idfs, qidf.avgdl) FROM memories m, qidf WHERE m.project = 'bm'"
    )
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            sql, {"q": query, "project": "bm", "common_df": 1.0, "max_postings": 100}
        ).fetchall()
    assert len(rows) == len(texts)
    assert sum(1 for _, inline, _ in rows if inline > 0) == 4
    for content, inline, reference in rows:
        assert inline == pytest.approx(reference, rel=1e-12), content
