"""``memlane maintain``'s purge and merge tasks on a real database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from memlane.pipeline import maintain
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.server.cli.main import main

pytestmark = pytest.mark.anyio


def _past(days: int = 1) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


async def _count(engine) -> int:
    return (await engine.stats())["memories"]


async def test_purge_deletes_expired_memories_in_batches(engine, monkeypatch):
    keep = await engine.remember({"content": "The VPN certificate is valid", "expires_at": "2999-01-01"})
    forever = await engine.remember({"content": "Alice leads the payments team"})
    for i in range(5):
        expired = {"content": f"Temporary door code number {i} is 48{i}1", "expires_at": _past()}
        await engine.remember(MemoryInput.parse(engine.config, expired, restoring=True))
    [dry] = await maintain.maintain(engine, ["purge"], dry_run=True)
    assert dry.summary == {"would_purge": 5} and await _count(engine) == 7
    monkeypatch.setattr(maintain, "PURGE_BATCH", 2)  # several batches
    seen = []
    [done] = await maintain.maintain(engine, ["purge"], progress=lambda *a: seen.append(a))
    assert done.summary == {"purged": 5}
    assert seen[-1] == ("purge", 5, 5) and len(seen) == 3
    assert await _count(engine) == 2
    assert {(await engine.get(keep.id)).id, (await engine.get(forever.id)).id} == {keep.id, forever.id}
    [again] = await maintain.maintain(engine, ["purge"])
    assert again.summary == {"purged": 0}


async def test_merge_keeps_the_oldest_with_merged_fields_and_provenance(engine):
    # Categories as the callers gave them: no automatic topic standing in for a missing category.
    engine.config.topics.enabled = False
    old = await engine.remember(
        {
            "content": "Alice prefers tabs over spaces in Python projects",
            "tags": ["style"],
            "priority": 2,
            "metadata": {"from": "retro"},
        }
    )
    dup1 = await engine.remember(
        {
            "content": "Alice prefers tabs over spaces in Python projects.",
            "tags": ["python", "style"],
            "priority": 4,
        }
    )
    dup2 = await engine.remember(
        {
            "content": "alice prefers tabs over spaces in python projects",
            "pinned": True,
            "category": "preference",
        }
    )
    other = await engine.remember(
        {"content": "Alice prefers dark mode in every editor", "project": "default"}
    )
    elsewhere = await engine.remember(
        {"content": "Alice prefers tabs over spaces in Python projects.", "project": "other"}
    )
    sims = {s[0] for s in dup1.similar}
    assert old.id in sims  # the store saw them as near-identical

    [dry] = await maintain.maintain(engine, ["merge"], dry_run=True)
    assert dry.summary["would_merge"] == 2
    [group] = dry.summary["groups"]
    assert group["id"] == str(old.id) and set(group["would_merge"]) == {str(dup1.id), str(dup2.id)}
    assert await _count(engine) == 5  # a dry run changes nothing

    [done] = await maintain.maintain(engine, ["merge"])
    assert done.summary["merged"] == 2 and done.summary["groups_total"] == 1
    assert await _count(engine) == 3
    m = await engine.get(old.id)
    assert m.content == "Alice prefers tabs over spaces in Python projects"  # the oldest's words
    assert set(m.tags) == {"style", "python"} and m.priority == 4 and m.pinned is True
    assert m.category == "preference" and m.metadata["from"] == "retro"
    prov = m.metadata["merged_from"]
    assert {p["id"] for p in prov} == {str(dup1.id), str(dup2.id)}
    assert {p["content"] for p in prov} == {
        "Alice prefers tabs over spaces in Python projects.",
        "alice prefers tabs over spaces in python projects",
    }
    assert all(len(p["content_hash"]) == 64 and p["created_at"] for p in prov)
    # Different content and other projects are untouched.
    assert (await engine.get(other.id)).metadata == {}
    assert (await engine.get(elsewhere.id)).project == "other"

    [again] = await maintain.maintain(engine, ["merge"])
    assert again.summary["merged"] == 0 and await _count(engine) == 3
    assert (await engine.get(old.id)).metadata["merged_from"] == prov


async def test_merge_resumes_from_its_cursor_and_clears_it(engine, database_url, monkeypatch):
    a = await engine.remember({"content": "The staging cluster runs in eu-west-2"})
    b = await engine.remember({"content": "The staging cluster runs in eu-west-2."})
    monkeypatch.setattr(maintain, "MERGE_BATCH", 1)
    # An interrupted run left its cursor after the first memory: the resumed run starts after it,
    # so the pair (whose older member is before the cursor) is not probed from that side.
    first = await engine.store.merge_probes(None, 1, 8)
    await engine.store.set_setting(maintain.MERGE_CURSOR, f"{first[0].key[0].isoformat()}|{first[0].key[1]}")
    [resumed] = await maintain.maintain(engine, ["merge"])
    assert resumed.summary["resumed"] is True and resumed.summary["checked"] == 1
    assert resumed.summary["merged"] == 0
    assert await engine.store.get_setting(maintain.MERGE_CURSOR) is None
    [full] = await maintain.maintain(engine, ["merge"])
    assert full.summary["resumed"] is False and full.summary["merged"] == 1
    assert (await engine.get(a.id)).metadata["merged_from"][0]["id"] == str(b.id)


def test_maintain_command_reports_purge_and_merge(settings, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", settings.database.url.get_secret_value())
    # remember refuses a past expiry; an import restores one as it was exported.
    exported = tmp_path / "expired.jsonl"
    exported.write_text(
        json.dumps({"content": "Old wifi password hint: the cat's name", "expires_at": _past()}) + "\n"
    )
    assert main(["import", str(exported)]) == 0
    capsys.readouterr()
    assert main(["maintain", "--task", "purge", "--task", "merge", "--dry-run"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [t["task"] for t in report["tasks"]] == ["purge", "merge"]
    assert report["tasks"][0]["would_purge"] == 1
    assert main(["maintain", "--task", "purge"]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["tasks"][0]["purged"] == 1
    with psycopg.connect(settings.database.url.get_secret_value()) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
