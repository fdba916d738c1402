"""``memlane maintain`` (its task runner and lock) and a memory's place in its source (migration 0005)."""

import json

import psycopg
import pytest

from memlane.pipeline import maintain
from memlane.pipeline.errors import InvalidInput, StoreError
from memlane.server.cli.main import main

pytestmark = pytest.mark.anyio


async def test_position_is_stored_returned_and_validated(engine):
    first = await engine.remember({"content": "Turn one of the call", "source": "call-7", "position": 0})
    second = await engine.remember({"content": "Turn two of the call", "source": "call-7", "position": 1})
    assert (await engine.get(first.id)).position == 0
    assert (await engine.get(second.id)).position == 1
    assert (await engine.remember({"content": "on its own"})).status == "created"
    for bad in (-1, "2", 1.5, True, 2**31):
        with pytest.raises(InvalidInput, match="position"):
            await engine.remember({"content": f"bad position {bad!r}", "position": bad})


async def test_maintain_runs_its_tasks_and_refuses_a_second_run(engine, database_url):
    await engine.remember({"content": "something to vacuum"})
    seen = []
    [dry] = await maintain.maintain(engine, ["vacuum"], dry_run=True, progress=lambda *a: seen.append(a))
    assert "memories" in dry.summary["would_vacuum"] and not seen
    [done] = await maintain.maintain(engine, ["vacuum"], progress=lambda *a: seen.append(a))
    assert "memories" in done.summary["vacuumed"]
    assert seen[-1][0] == "vacuum" and seen[-1][1] == seen[-1][2] == len(done.summary["vacuumed"])
    with psycopg.connect(database_url) as conn:
        analysed = conn.execute(
            "SELECT last_analyze FROM pg_stat_user_tables WHERE relname = 'memories'"
        ).fetchone()
        assert analysed[0] is not None
        # Another maintain holds the lock: this one is refused at once, not queued.
        conn.execute("SELECT pg_advisory_lock(%s)", (maintain.MAINTAIN_LOCK_KEY,))
        with pytest.raises(StoreError, match="another `memlane maintain` is running"):
            await maintain.maintain(engine)
        conn.execute("SELECT pg_advisory_unlock(%s)", (maintain.MAINTAIN_LOCK_KEY,))
    with pytest.raises(InvalidInput, match="unknown maintain task"):
        await maintain.maintain(engine, ["nope"])


def test_maintain_command_prints_one_json_report(settings, capsys, monkeypatch):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", settings.database.url.get_secret_value())
    assert main(["maintain", "--dry-run"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["dry_run"] is True and [t["task"] for t in report["tasks"]] == list(maintain.TASKS)
    assert main(["maintain", "--task", "nope"]) == 1
    assert "unknown maintain task" in capsys.readouterr().err
