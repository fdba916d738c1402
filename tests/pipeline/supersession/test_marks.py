"""How marks are made (pipeline/supersession/marks.py): by update like by remember, never between
reports of events or a batch's list items, and restored by import from memlane's own export."""

from __future__ import annotations

import json

import pytest

from memlane.server.cli.main import main

pytestmark = pytest.mark.anyio


async def test_an_update_to_a_newer_value_supersedes_like_a_new_memory(engine):
    old = await engine.remember({"content": "The standup is at 9am", "project": "p"})
    note = await engine.remember({"content": "Bring snacks on Friday", "project": "p"})
    await engine.update(str(note.id), {"content": "The standup moved to 10am"})
    assert (await engine.store.get(old.id)).superseded_by == note.id


async def test_reports_of_events_and_a_batch_s_list_items_replace_and_contradict_nothing(engine):
    log = [
        {"content": f"Weekly sync {i}: the team reviewed ticket number {i}", "project": "p"} for i in range(6)
    ]
    out = await engine.remember_many(log)
    for i in range(6):
        single = await engine.remember(
            {"content": f"Weekly sync {10 + i}: the team reviewed ticket number {10 + i}", "project": "p"}
        )
        out.append(single)
    assert all(not r.supersedes and not r.conflicts and r.superseded_by is None for r in out)
    prices = await engine.remember_many(
        [
            {"content": f"The {size} plan costs ${price} a month", "project": "q"}
            for size, price in (("small", 5), ("large", 9))
        ]
    )
    assert all(not r.conflicts and not r.supersedes for r in prices)


def test_export_and_import_carry_a_supersession_even_one_the_detector_would_not_make(cli, tmp_path):
    run = cli
    old = run("remember", "Our standup is in room 4.12", "--project", "src")
    new = run("remember", "Bring snacks on Friday", "--project", "src")
    run("supersede", old["id"], new["id"], "--json")  # a user's decision
    exported = tmp_path / "export.jsonl"
    assert main(["export", "--project", "src", "-o", str(exported)]) == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    assert any(line.get("superseded_by") == new["id"] for line in lines)
    copied = tmp_path / "copy.jsonl"
    copied.write_text("".join(json.dumps({**line, "project": "copy"}) + "\n" for line in lines))
    report = run("import", str(copied), "--json")
    assert report["stored"] == 2 and report["superseded"] == 1
    found = run(
        "recall", "standup room", "--project", "copy", "--json", "--include-history", "--as-of", "2999-01-01"
    )
    marked = [m for m in found["memories"] if m["content"] == "Our standup is in room 4.12"]
    assert marked and "superseded_by" in marked[0]
