"""The store's reads about itself as a whole and its checkpoint (store/admin.py), and its ``dsn``:
what a benchmark or an operator's tool asks of a store, on a real database."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from memlane.pipeline.config import DatabaseConfig, EngineConfig
from memlane.pipeline.engine import Engine

pytestmark = pytest.mark.anyio


async def test_the_dsn_is_the_one_the_store_was_opened_with(engine, database_url):
    assert engine.store.dsn == database_url
    with pytest.raises(AttributeError):
        engine.store.dsn = "postgresql:///elsewhere"  # read-only


async def test_the_database_size_is_postgres_own_and_grows_with_the_memories(engine, database_url):
    before = await engine.store.database_size()
    with psycopg.connect(database_url) as conn:
        (direct,) = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    assert isinstance(before, int) and before == pytest.approx(direct, rel=0.05)
    await engine.remember_many(
        [{"content": f"Deploy note {i}: the {i}th canary of the billing service passed"} for i in range(300)]
    )
    await engine.store.checkpoint()  # (the new rows' pages on disk)
    assert await engine.store.database_size() > before


async def test_a_checkpoint_is_taken_by_a_superuser_and_refused_quietly_to_an_application_role(
    engine, external_url, tmp_path, embedder
):
    assert await engine.store.checkpoint() is True  # the embedded server's role is a superuser
    app = Engine(
        EngineConfig(data_dir=tmp_path, database=DatabaseConfig(url=external_url)), embedder=embedder
    )
    await app.open()
    try:
        assert await app.store.checkpoint() is False  # no superuser, no pg_checkpoint
        assert (await app.stats())["memories"] == 0  # the connection is still good
    finally:
        await app.close()


async def test_stored_contents_are_the_given_texts_held_word_for_word_in_the_given_projects(engine):
    await engine.remember({"content": "Alice owns the billing service", "project": "a"})
    await engine.remember({"content": "Bob owns the search index", "project": "b"})
    asked = ["Alice owns the billing service", "Bob owns the search index", "alice owns the billing service"]
    assert await engine.store.stored_contents(["a"], asked) == {"Alice owns the billing service"}
    assert await engine.store.stored_contents(["a", "b"], asked) == set(asked[:2])
    assert await engine.store.stored_contents(["c"], asked) == set()
    assert await engine.store.stored_contents(["a"], []) == set()


async def test_first_stored_gives_the_oldest_memories_of_the_projects_with_their_vectors(engine):
    texts = [
        "The staging cluster moved to Frankfurt",
        "Carol reviews every schema migration",
        "The on-call rotation changes on Mondays",
    ]
    for text in texts:
        await engine.remember({"content": text, "project": "a"})
    await engine.remember({"content": "Dave prefers tabs", "project": "b"})
    first = await engine.store.first_stored(["a"], 2)
    assert [content for content, _ in first] == texts[:2]
    expected = engine.embedder.embed_memories(texts[:2])
    for (_, vector), want in zip(first, expected, strict=True):
        assert isinstance(vector, list) and len(vector) == engine.embedder.dim
        assert np.allclose(vector, want, atol=1e-4)
    assert [c for c, _ in await engine.store.first_stored(["a", "b"], 10)] == [*texts, "Dave prefers tabs"]
