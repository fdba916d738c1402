"""A user's decisions and a memory's past (pipeline/supersession/undo.py, history.py) through the
engine and the command line: supersede by hand, unsupersede, history."""

from __future__ import annotations

import json
from uuid import uuid4

import psycopg
import pytest

from memlane.pipeline.access import Principal
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput, NotFound
from memlane.pipeline.supersession.marks import Exported
from memlane.server.cli.main import main

pytestmark = pytest.mark.anyio


async def test_a_user_can_undo_and_redo_a_supersession(engine, maya):
    lisbon, berlin = await maya()
    again = await engine.supersede(str(lisbon.id), None)
    assert again.superseded_by is None and again.valid_until is None
    redone = await engine.supersede(str(lisbon.id), str(berlin.id))
    assert redone.superseded_by == berlin.id
    with pytest.raises(InvalidInput, match="already supersedes"):
        await engine.supersede(str(berlin.id), str(lisbon.id))
    with pytest.raises(InvalidInput, match="itself"):
        await engine.supersede(str(berlin.id), str(berlin.id))
    other = await engine.remember({"content": "Tom lives in Porto", "project": "q"})
    with pytest.raises(InvalidInput, match="one project"):
        await engine.supersede(str(other.id), str(berlin.id))


def test_supersede_and_unsupersede_commands(cli, capsys):
    run = cli
    old = run("remember", "The standup is at 9am", "--occurred-at", "2026-01-05")
    new = run("remember", "The standup moved to 10am", "--occurred-at", "2026-02-02")
    assert [s["id"] for s in new["supersedes"]] == [old["id"]]
    current = run("unsupersede", old["id"], "--json")
    assert current["id"] == old["id"] and "superseded_by" not in current
    marked = run("supersede", old["id"][:8], new["id"][:8], "--json")
    assert marked["superseded_by"] == new["id"] and marked["valid_until"].startswith("2026-02-02")
    assert main(["supersede", old["id"], old["id"]]) != 0
    assert "cannot supersede itself" in capsys.readouterr().err
    assert main(["unsupersede", old["id"]]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"Memory {old['id'][:8]}") and "is current again" in said
    assert "The standup is at 9am" in said and "replaced by" not in said
    assert main(["supersede", old["id"], new["id"]]) == 0
    said = capsys.readouterr().out
    assert "now marked as replaced" in said and f"replaced by {new['id'][:8]}" in said


async def test_an_update_keeps_the_content_it_replaces_as_a_version_and_forget_drops_them(
    engine, database_url
):
    m = await engine.remember({"content": "The wifi password hint is the cat's name", "project": "p"})
    await engine.update(str(m.id), {"content": "The wifi password hint is the dog's name"})
    await engine.update(str(m.id), {"tags": ["home"]})
    await engine.update(str(m.id), {"priority": 4})  # not a change of what it says: no version
    h = await engine.history(str(m.id))
    assert [(v["version"], v["content"], list(v["tags"] or ())) for v in h["versions"]] == [
        (1, "The wifi password hint is the cat's name", []),
        (2, "The wifi password hint is the dog's name", []),
    ]
    assert h["memory"].tags == ("home",) and h["supersedes"] == [] and h["superseded_by"] is None
    await engine.forget(str(m.id))
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memory_versions").fetchone()[0] == 0


def test_history_command(cli):
    run = cli
    old = run("remember", "The standup is at 9am", "--occurred-at", "2026-01-05")
    new = run("remember", "The standup moved to 10am", "--occurred-at", "2026-02-02")
    h = run("history", new["id"][:8], "--json")
    assert h["memory"]["content"] == "The standup moved to 10am" and h["versions"] == []
    assert [s["id"] for s in h["supersedes"]] == [old["id"]] and h["superseded_by"] is None
    assert run("history", old["id"], "--json")["superseded_by"]["id"] == new["id"]


async def test_unsupersede_makes_a_memory_current_again_and_supersede_without_new_still_does(engine, maya):
    lisbon, berlin = await maya()
    current = await engine.unsupersede(str(lisbon.id)[:8])
    assert current.id == lisbon.id and current.superseded_by is None and current.valid_until is None
    assert (await engine.get(str(berlin.id))).superseded_by is None  # the newer one is untouched
    await engine.supersede(str(lisbon.id), str(berlin.id))
    assert (await engine.get(str(lisbon.id))).superseded_by == berlin.id
    again = await engine.supersede(str(lisbon.id), None)  # the form unsupersede replaced
    assert again.superseded_by is None


async def test_supersession_by_hand_is_refused_outside_the_caller_s_projects(engine, maya):
    lisbon, berlin = await maya()  # project "p"
    outsider = Principal("ci", ("other*",))
    member = Principal("team", ("p",))
    # A memory of a project the caller may not use is a missing id to it, as for get and forget.
    with pytest.raises(NotFound):
        await engine.supersede(str(lisbon.id), str(berlin.id), principal=outsider)
    with pytest.raises(NotFound):
        await engine.unsupersede(str(lisbon.id), principal=outsider)
    with pytest.raises(NotFound):
        await engine.history(str(lisbon.id), principal=outsider)
    with pytest.raises(NotFound):
        await engine.restore_marks(
            [Exported("a", superseded_by="b"), Exported("b")], [lisbon.id, berlin.id], principal=outsider
        )
    assert (await engine.get(str(lisbon.id))).superseded_by == berlin.id  # nothing changed
    current = await engine.unsupersede(str(lisbon.id), principal=member)
    assert current.superseded_by is None
    marked = await engine.supersede(str(lisbon.id), str(berlin.id), principal=member)
    assert marked.superseded_by == berlin.id


async def test_supersession_by_hand_refuses_an_unknown_id_and_a_memory_by_itself(engine, maya):
    lisbon, berlin = await maya()
    missing = str(uuid4())
    with pytest.raises(NotFound, match=missing):
        await engine.supersede(str(lisbon.id), missing)
    with pytest.raises(NotFound, match=missing):
        await engine.supersede(missing, str(berlin.id))
    with pytest.raises(NotFound, match=missing):
        await engine.unsupersede(missing)
    with pytest.raises(InvalidInput, match="itself"):
        await engine.supersede(str(berlin.id), str(berlin.id)[:8])
    assert (await engine.get(str(lisbon.id))).superseded_by == berlin.id


async def test_restore_marks_sets_an_export_s_marks_between_the_stored_memories(engine):
    p = {"project": "p"}
    room = await engine.remember({**p, "content": "Our standup is in room 4.12"})
    snacks = await engine.remember({**p, "content": "Bring snacks on Friday"})
    went = await engine.remember({**p, "content": "I went to Japan in 2019", "occurred_at": "2024-03-01"})
    lunch = await engine.remember({**p, "content": "Lunch is at noon"})
    exported = [
        Exported("e1", superseded_by="e2"),
        Exported("e2"),
        Exported("e3", conflicts_with=["e4"]),
        Exported("e4", conflicts_with=["e3"]),
        Exported("e5", superseded_by="not in the file"),
    ]
    stored = [room.id, snacks.id, went.id, lunch.id, lunch.id]
    restored = await engine.restore_marks(exported, stored, principal=Principal("team", ("p",)))
    assert (restored.superseded, restored.conflicts) == (1, 1)
    assert (await engine.get(str(room.id))).superseded_by == snacks.id
    assert (await engine.get(str(went.id))).conflicts_with == (lunch.id,)
    assert (await engine.get(str(lunch.id))).conflicts_with == (went.id,)
    assert (await engine.get(str(lunch.id))).superseded_by is None
    none = await engine.restore_marks([Exported("x")], [lunch.id])
    assert (none.superseded, none.conflicts) == (0, None)
    with pytest.raises(InvalidInput):
        await engine.restore_marks([Exported("x")], [])


def test_the_commands_go_through_the_engine(cli, monkeypatch, tmp_path):
    """``memlane supersede``, ``unsupersede``, ``history`` and import's restore of marks are the
    engine's methods, with their checks: no command reaches into the store for marks."""
    called: list[str] = []
    for name in ("supersede", "unsupersede", "history", "restore_marks"):
        original = getattr(Engine, name)

        def spy(self, *args, _original=original, _name=name, **kwargs):
            called.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(Engine, name, spy)
    run = cli
    old = run("remember", "The standup is at 9am", "--occurred-at", "2026-01-05")
    new = run("remember", "The standup moved to 10am", "--occurred-at", "2026-02-02")
    run("unsupersede", old["id"], "--json")
    run("supersede", old["id"], new["id"], "--json")
    run("history", old["id"], "--json")
    exported = tmp_path / "export.jsonl"
    assert main(["export", "-o", str(exported)]) == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    copied = tmp_path / "copy.jsonl"
    copied.write_text("".join(json.dumps({**line, "project": "copy"}) + "\n" for line in lines))
    assert run("import", str(copied), "--json")["superseded"] == 1
    assert called == ["unsupersede", "supersede", "history", "restore_marks"]
