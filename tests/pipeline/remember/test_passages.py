"""Long memories found in full (remember/passages.py): a memory longer than the model's window gets
a vector per later part, written with it, replaced with its content, made again by reembed and by
``memlane maintain --task passages``, and read by the vector arm (store/search.py)."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from memlane.pipeline import maintain
from memlane.pipeline.request import Filters
from memlane.pipeline.store.search import PASSAGE_MARGIN

pytestmark = pytest.mark.anyio

# About 2,300 characters of front-end styling, then one fact about something else entirely: past
# the first window, the memory's own vector knows nothing of it.
STYLING = [
    "Use a consistent spacing scale for margins and paddings across every component.",
    "Buttons should share one border radius and one focus ring colour.",
    "Keep the typography to two font families, one for headings and one for body text.",
    "The navigation bar collapses into a hamburger menu below the tablet breakpoint.",
    "Cards get a subtle shadow on hover and lift by two pixels.",
    "Form inputs show their validation message under the field in a muted red.",
    "Dark mode swaps the palette through CSS custom properties on the root element.",
    "Icons come from one set, sized to match the line height of the text beside them.",
]
NEEDLE = (
    "Backups: the nightly pg_dump of the orders database is uploaded to the otter-archive bucket in"
    " Frankfurt. Each nightly dump is encrypted before it is uploaded, kept for thirty days, and"
    " restored once a month to check that the backup works."
)
LONG = "assistant: " + " ".join(STYLING * 4) + " " + NEEDLE
QUESTION = "Where are the nightly database dumps uploaded?"


def _passage_rows(database_url: str, memory_id) -> list[tuple[int, str]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(
            "SELECT part, project FROM memory_passages WHERE memory_id = %s ORDER BY part", (memory_id,)
        ).fetchall()


def test_the_passages_of_a_long_text_cover_its_end_one_window_each(embedder):
    parts = embedder.passages(LONG)
    assert parts, "a text of about 500 tokens has passages"
    assert parts[-1].endswith(NEEDLE)
    size = embedder.window // 2
    for p in parts:
        assert len(embedder.token_offsets(p)) <= size
    # The first starts three quarters of a part in (the memory's own vector reads the start).
    first_token = embedder.token_offsets(LONG)[size * 3 // 4]
    assert LONG[first_token[0] :].startswith(parts[0])
    assert embedder.passages("user: a short statement") == []


async def test_a_long_memory_is_found_by_its_end_and_a_short_one_gets_no_passages(engine, database_url):
    long = await engine.remember({"content": LONG, "project": "p"})
    # Short memories of other things (cosines 0.0 to 0.11 to the question): the long memory's own
    # vector ranks below them, its passage above.
    short = await engine.remember({"content": "user: my sister's birthday is in June", "project": "p"})
    for text in (
        "user: I prefer tea over coffee in the morning",
        "user: the cat knocked the plant off the shelf",
        "user: we are going hiking in the Alps next summer",
    ):
        await engine.remember({"content": text, "project": "p"})
    rows = _passage_rows(database_url, long.id)
    assert [r[0] for r in rows] == list(
        range(1, len(embedder_passages := engine.embedder.passages(LONG)) + 1)
    )
    assert {r[1] for r in rows} == {"p"}
    assert _passage_rows(database_url, short.id) == []
    assert (await engine.store.stats(["p"]))["passages"] == len(rows)

    q = engine.embedder.embed_query(QUESTION)
    filters = Filters(projects=("p",))
    ids, _, _ = await engine.store.candidates("vector", text=QUESTION, filters=filters, k=1, embedding=q)
    assert ids == [long.id]
    # Its score: the closer of its own vector and its best passage less the margin.
    [hit] = [
        h
        for h in await engine.store.search(
            text=QUESTION, embedding=q, filters=filters, k=10, arms=("vector",)
        )
        if h.memory.id == long.id
    ]
    own = float(np.dot(engine.embedder.embed_memories([LONG])[0], q))
    best = max(float(np.dot(v, q)) for v in engine.embedder.embed_memories(embedder_passages))
    assert hit.scores["vector"] == pytest.approx(max(own, best - PASSAGE_MARGIN), abs=1e-3)
    assert best - PASSAGE_MARGIN > own  # the passage found it, not the memory's own vector

    # Without its passages the same search ranks it below the short memories.
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM memory_passages")
    ids, _, _ = await engine.store.candidates("vector", text=QUESTION, filters=filters, k=1, embedding=q)
    assert ids != [long.id]

    # maintain makes them again, once.
    [dry] = await maintain.maintain(engine, ["passages"], dry_run=True)
    assert dry.summary == {"would_read": 1}
    [done] = await maintain.maintain(engine, ["passages"])
    assert done.summary == {"read": 1, "memories": 1, "passages": len(embedder_passages)}
    assert len(_passage_rows(database_url, long.id)) == len(embedder_passages)
    [again] = await maintain.maintain(engine, ["passages"])
    assert again.summary == {"read": 0, "memories": 0, "passages": 0}
    ids, _, _ = await engine.store.candidates("vector", text=QUESTION, filters=filters, k=1, embedding=q)
    assert ids == [long.id]


async def test_recall_through_the_tools_finds_the_end_of_a_long_memory(engine):
    long = await engine.remember({"content": LONG, "project": "p"})
    for text in (
        "user: backups of the laptop go to an external drive",
        "user: we keep nightly builds for a week",
    ):
        await engine.remember({"content": text, "project": "p"})
    res = await engine.recall({"query": QUESTION, "project": "p", "count_accesses": False})
    assert res.ranked[0].memory.id == long.id


async def test_new_content_replaces_the_passages_and_forget_removes_them(engine, database_url):
    r = await engine.remember({"content": LONG, "project": "p"})
    assert _passage_rows(database_url, r.id)
    await engine.update(str(r.id), {"content": "assistant: use one spacing scale"})
    assert _passage_rows(database_url, r.id) == []
    await engine.update(str(r.id), {"content": LONG + " " + LONG})
    assert len(_passage_rows(database_url, r.id)) == len(engine.embedder.passages(LONG + " " + LONG))
    await engine.forget(str(r.id))
    assert _passage_rows(database_url, r.id) == []


async def test_reembed_makes_the_passages_again(engine, database_url):
    r = await engine.remember({"content": LONG, "project": "p"})
    n = len(_passage_rows(database_url, r.id))
    with psycopg.connect(database_url, autocommit=True) as conn:  # as an interrupted reembed leaves it
        conn.execute("UPDATE memories SET embedding = NULL")
        conn.execute("DELETE FROM memory_passages")
    assert await engine.reembed() == 1
    assert len(_passage_rows(database_url, r.id)) == n


async def test_passages_off_writes_none_and_maintain_says_why(engine_config, open_engine, database_url):
    cfg = engine_config.model_copy(
        update={"embedding": engine_config.embedding.model_copy(update={"passages": False})}
    )
    eng = await open_engine(cfg)
    r = await eng.remember({"content": LONG, "project": "p"})
    assert _passage_rows(database_url, r.id) == []
    [report] = await maintain.maintain(eng, ["passages"])
    assert report.summary == {"skipped": "embedding.passages is false"}


async def test_a_large_batch_stored_in_parts_writes_the_passages_of_its_long_memories(engine, database_url):
    batch = [{"content": f"user: note {i} about the garden", "project": "p"} for i in range(140)]
    batch.insert(70, {"content": LONG, "project": "p"})
    results = await engine.remember_many(batch)
    assert len(_passage_rows(database_url, results[70].id)) == len(engine.embedder.passages(LONG))
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(DISTINCT memory_id) FROM memory_passages").fetchone()[0] == 1
