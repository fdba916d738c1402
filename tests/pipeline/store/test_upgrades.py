"""Upgrades from every earlier schema (issue 27): a store left at version K by the memlane of that
era (its schema built by the real migration files 0001..K, its rows written with that era's SQL:
tests/support/eras.py) opens with the current code, keeps every memory, link and setting, has the
new columns backfilled (at open, or by `memlane maintain`'s tasks) and answers a recall.

And a migration killed mid-way: a real process dies (SIGKILL) while a long migration runs; the
store is left at a consistent earlier version, and the next open completes it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import psycopg
import pytest
from support import eras
from support.db import new_database
from support.postmaster import wait_until
from support.processes import MEMLANE, server_env

from memlane.pipeline import maintain
from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.recall.query import Ablation
from memlane.pipeline.store import migrate, vectors

# Each test builds an earlier schema in its database.
pytestmark = [pytest.mark.anyio, pytest.mark.empty_database]

LATEST = migrate.latest_version()
EARLIER = list(range(1, LATEST))


@pytest.fixture(scope="module")
def fresh_schema(pg_root, embedder) -> dict:
    """The schema of a store the current code creates (its model recorded), without data."""
    dsn = new_database(pg_root)

    async def create() -> None:
        eng = Engine(EngineConfig(database=DatabaseConfig(url=dsn)), embedder=embedder)
        await eng.open()
        await eng.close()

    asyncio.run(create())
    with psycopg.connect(dsn) as conn:
        return eras.schema(conn)


def _memories(conn: psycopg.Connection) -> dict:
    """Every memory's columns (its vector as text), by id."""
    cur = conn.cursor(row_factory=psycopg.rows.dict_row)
    return {r["id"]: r for r in cur.execute("SELECT *, embedding::text AS embedding FROM memories")}


def _rows(conn: psycopg.Connection, sql: str) -> set[tuple]:
    return {tuple(r) for r in conn.execute(sql).fetchall()}


@pytest.mark.parametrize("version", EARLIER, ids=[f"from_schema_{k}" for k in EARLIER])
async def test_a_store_of_every_earlier_schema_upgrades_with_its_data(
    version, database_url, embedder, tmp_path, fresh_schema, monkeypatch
):
    # alpha (4 memories) is big enough for its own indexes, beta (2) is not.
    monkeypatch.setattr(vectors, "PROJECT_INDEX_MIN", 3)
    eras.build(database_url, version, embedder.model_id, embedder.dim)
    era = eras.write_era(database_url, version, embedder.embed_memories)
    with psycopg.connect(database_url) as conn:
        before = _memories(conn)

    eng = Engine(
        EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=database_url)), embedder=embedder
    )
    await eng.open()
    try:
        assert eng.store.schema_version == LATEST
        reports = {r.task: r.summary for r in await maintain.maintain(eng)}
        assert reports["purge"]["purged"] == 0 and reports["merge"]["merged"] == 0, reports
        assert reports["links"]["linked"] == (0 if version >= 6 else len(era.memories)), reports
        res = await eng.recall(
            dict(query="who reviews database migrations?", project="alpha", count_accesses=False)
        )
        assert res.memories[0][0].id == era.id("a2")
        res = await eng.recall(
            dict(query="how long do we keep invoices?", project="beta", count_accesses=False)
        )
        assert res.memories[0][0].id == era.id("b1")
    finally:
        await eng.close()

    with psycopg.connect(database_url) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM memlane_migrations ORDER BY 1")] == list(
            range(1, LATEST + 1)
        )
        assert eras.schema(conn) == fresh_schema  # as if created by this memlane
        # Every memory, whole: each column as the era left it, the new ones filled by the backfills.
        after = _memories(conn)
        assert set(after) == set(before) == {m["id"] for m in era.memories.values()}
        for mid, was in before.items():
            now = after[mid]
            for col, value in was.items():
                if col in ("access_count", "last_accessed_at"):  # moved to memory_access (0003)
                    assert col not in now
                elif col in ("category", "topics", "fact_type") and value is None:
                    continue  # assigned by maintain's summaries task (checked below)
                else:
                    assert now[col] == value, (mid, col)
            assert now["topics"] is not None and now["fact_type"] is not None, mid
            assert "position" in was or now["position"] is None, mid
        # Access statistics moved to memory_access (0003) or kept there.
        assert _rows(conn, "SELECT * FROM memory_access") == {(k, n, t) for k, (n, t) in era.access.items()}
        settings = dict(conn.execute("SELECT key, value FROM memlane_settings").fetchall())
        assert era.settings.items() <= settings.items()
        # The BM25 statistics (0002) are exact.
        assert _rows(conn, "SELECT * FROM memlane_projects") == _rows(
            conn, "SELECT project, count(*), sum(length(tsv)) FROM memories GROUP BY project"
        )
        assert _rows(conn, "SELECT * FROM memlane_lexemes") == _rows(
            conn, "SELECT project, u.lexeme, count(*) FROM memories, unnest(tsv) u GROUP BY 1, 2"
        )
        # The graph (0006): the era's rows as they were, or made by maintain's links task.
        linked = _rows(conn, "SELECT memory_id, version, linked_at FROM memory_linked")
        if version >= 6:
            assert linked == era.linked
            assert _rows(conn, "SELECT project, key, name, kind FROM memlane_entities") == era.entities
            assert (
                _rows(
                    conn,
                    "SELECT me.memory_id, e.key FROM memory_entities me JOIN memlane_entities e ON e.id = me.entity_id",
                )
                == era.mentions
            )
            assert _rows(conn, "SELECT src, kind, dst, weight FROM memory_links") == era.links
        else:
            assert {r[0] for r in linked} == set(after)
        # Topics (0007): the era's kept, every category summarised.
        assert era.topics <= _rows(conn, "SELECT project, name, created_at FROM memlane_topics")
        assert era.summaries <= _rows(
            conn, "SELECT project, category, summary, source FROM category_summaries"
        )
        categories = _rows(conn, "SELECT project, category FROM memories WHERE category IS NOT NULL")
        summarised = _rows(
            conn, "SELECT project, category FROM category_summaries WHERE pending = 0 AND summary <> ''"
        )
        assert categories <= summarised
        # One vector and one full-text index for alpha (0008, 0009), none over every project.
        assert _rows(conn, "SELECT project FROM memlane_vector_indexes") == {("alpha",)}
        per_project = {r[0] for r in eras.schema(conn, per_project=True)["indexes"]} - {
            r[0] for r in fresh_schema["indexes"]
        }
        assert per_project == {
            vectors.index_name("alpha"),
            vectors.text_index_name("alpha"),
            vectors.passages_index_name("alpha"),
        }


# Enough memories at schema 1 that migration 0002 (every memory's lexemes into the BM25
# statistics, one statement) runs for seconds: ~2 s at 50,000 on this 2-core machine.
BIG = 50_000


@pytest.mark.slow
async def test_a_migration_killed_mid_way_leaves_an_earlier_version_and_the_next_open_completes_it(
    pg_root, embedder, tmp_path
):
    dsn = new_database(pg_root)
    eras.build(dsn, 1, embedder.model_id, embedder.dim)
    eras.big(dsn, BIG)
    with psycopg.connect(dsn) as conn:
        before = eras.schema(conn, per_project=True)
    # The subprocess connects under its own name, so the migration's backend can be watched.
    env = server_env(tmp_path, MEMLANE_DATABASE__URL=dsn + "&application_name=memlane-killed")
    proc = subprocess.Popen(
        [MEMLANE, "doctor"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    watch = psycopg.connect(pg_root, autocommit=True)

    def backend(running: str | None = None) -> bool:
        return watch.execute(
            "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'memlane-killed'"
            " AND (%s::text IS NULL OR (state = 'active' AND strpos(query, %s) > 0))",
            (running, running),
        ).fetchone()[0]

    try:
        wait_until(lambda: backend("CREATE TABLE memlane_projects"), 120, "migration 0002 runs", 0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # Its backend finishes the statement, finds its client gone and ends: rolled back, as the
        # migration and its row are one transaction.
        wait_until(lambda: not backend(), 60, "the killed process's backend ends")
    finally:
        watch.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with psycopg.connect(dsn) as conn:
        assert eras.version_of(conn) == 1
        assert eras.schema(conn, per_project=True) == before  # nothing of 0002 left behind
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == BIG

    eng = Engine(EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=dsn)), embedder=embedder)
    await eng.open()
    try:
        assert eng.store.schema_version == LATEST
        res = await eng.recall(dict(query="memory 4242", project="p0", ablation=Ablation(arms=("keyword",))))
        assert res.memories[0][0].content.startswith("memory 4242 ")
    finally:
        await eng.close()
    with psycopg.connect(dsn) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM memlane_migrations ORDER BY 1")] == list(
            range(1, LATEST + 1)
        )
        assert conn.execute("SELECT sum(docs) FROM memlane_projects").fetchone()[0] == BIG


def test_the_tests_migrated_template_is_the_store_memlane_creates(
    pg_root, store_template, fresh_schema, embedder
):
    """The copy most tests start from (conftest's store_template) is what memlane makes of an
    empty database: else those tests would run against a schema no user has."""
    dsn = new_database(pg_root, template=store_template)

    async def open_it() -> None:
        eng = Engine(EngineConfig(database=DatabaseConfig(url=dsn)), embedder=embedder)
        await eng.open()
        await eng.close()

    asyncio.run(open_it())
    with psycopg.connect(dsn) as conn:
        assert eras.schema(conn) == fresh_schema
