"""Each format's fixture (tests/support/exports.py) imported into a real store: what is stored,
what its trap leaves out, that a second import adds nothing, and that recall finds the content."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from support import exports

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.importers import READERS, detect
from memlane.pipeline.importers.records import WrongFormat
from memlane.pipeline.importers.run import Importer, ImportReport

pytestmark = pytest.mark.anyio


async def _import(engine, fmt: str, path: Path, project: str, *, dry_run: bool = False) -> dict:
    report = ImportReport(fmt, dry_run=dry_run)
    await Importer(engine, report, source_name=path.name, project=project).run(READERS[fmt].read(path))
    return report.as_dict()


async def _contents(engine, project: str) -> list[str]:
    return [m.content async for batch in engine.store.iter_memories(project=project) for m in batch]


async def _memories(engine, project: str) -> list:
    return [m async for batch in engine.store.iter_memories(project=project) for m in batch]


async def _top(engine, question: str, project: str, k: int = 3) -> list[str]:
    res = await engine.recall({"query": question, "project": project, "limit": k})
    return [m.content for m, _ in res.memories]


async def _twice(engine, fmt: str, path: Path, project: str) -> tuple[dict, dict]:
    first = await _import(engine, fmt, path, project)
    n = len(await _contents(engine, project))
    second = await _import(engine, fmt, path, project)
    assert second["stored"] == 0, second
    assert len(await _contents(engine, project)) == n
    return first, second


async def test_chatgpt_keeps_the_current_branch_and_the_custom_instructions_once(engine, tmp_path):
    folder = exports.write_chatgpt(tmp_path / "export")
    first, second = await _twice(engine, "chatgpt", folder, "gpt")
    stored = await _contents(engine, "gpt")
    text = "\n".join(stored)
    assert "Frankfurt" in text and "ReplicatedMergeTree" in text and "Kafka feeds Flink" in text
    assert "192 GB RAM" in text  # the code cell's output
    assert "giraffe" not in text.lower() and "Gerald" not in text  # the abandoned branch
    assert "zebras" not in text  # reasoning
    assert (
        first["skipped_reasons"]["abandoned branch"] == 2
        and first["skipped_reasons"]["hidden system message"] == 1
    )
    prefs = [m for m in await _memories(engine, "gpt") if m.category == "preferences"]
    assert sorted(m.metadata["original_id"] for m in prefs) == [
        "custom-instructions:instructions",
        "custom-instructions:profile",
    ]
    assert first["duplicate"] >= 2  # the second conversation's copy of the custom instructions
    assert first["conversations"] == 2 and first["read"] == 13  # 9 messages, 4 custom-instruction facts
    turns = [
        m
        for m in await _memories(engine, "gpt")
        if m.source == "chatgpt:c0ffee00-0000-4000-8000-000000000001"
    ]
    assert turns and all(m.occurred_at is not None and m.occurred_at.year == 2026 for m in turns)
    assert any("Frankfurt" in c for c in await _top(engine, "where does the ClickHouse cluster run?", "gpt"))
    assert any("Mila" in c for c in await _top(engine, "which school does my daughter go to?", "gpt"))
    assert second["duplicate"] == 13 and second["already_imported"] == 2  # every message and fact


async def test_claude_code_merges_a_reply_and_leaves_out_thinking_tools_and_boilerplate(engine, tmp_path):
    root = exports.write_claude_code(tmp_path / "projects")
    first, _ = await _twice(engine, "claude-code", root, "cc")
    text = "\n".join(await _contents(engine, "cc"))
    assert "quokkas" not in text and "walrus-marker" not in text  # thinking, tool call and result
    assert "/clear" not in text and "Caveat" not in text and "Internal reminder" not in text
    assert "HTTP 409" in text
    merged = [c for c in await _contents(engine, "cc") if "regression test for invoice dates" in c]
    assert len(merged) == 1 and merged[0].startswith("assistant: ")
    reasons = first["skipped_reasons"]
    assert reasons["thinking"] == 1 and reasons["tool call"] == 1 and reasons["tool result"] == 1
    assert reasons["meta line"] == 1 and reasons["command boilerplate"] == 1
    assert first["read"] == 4  # the prompt, the merged reply, the answer, the next prompt
    assert any("timezone bug" in c for c in await _top(engine, "why is the payments test flaky?", "cc"))


async def test_server_memory_keeps_a_fact_stated_only_by_a_relation(engine, tmp_path):
    path = exports.write_server_memory(tmp_path / "memory.jsonl")
    first, second = await _twice(engine, "server-memory", path, "graph")
    assert first["read"] == 5 and first["stored"] == 5 and second["duplicate"] == 5
    stored = await _memories(engine, "graph")
    assert "Bob Martins mentors Alice Chen" in [m.content for m in stored]
    entities = {e.name for _, e in await engine.store.memory_entities([m.id for m in stored])}
    assert {"Alice Chen", "Acme Logistics", "Bob Martins"} <= entities
    alice = next(m for m in stored if m.content == "Alice Chen: Leads the payments team")
    assert alice.tags == ("person",) and alice.metadata["original_id"] == "entity:Alice Chen#0"
    assert alice.metadata["imported_from"] == "server-memory" and alice.source == "server-memory:memory.jsonl"
    assert "Bob Martins mentors Alice Chen" in await _top(engine, "who mentors Alice?", "graph")


async def test_mcp_memory_service_skips_deleted_and_superseded_rows(engine, tmp_path):
    db = exports.write_mcp_memory_service(tmp_path / "sqlite_vec.db")
    before = db.read_bytes()
    first, _ = await _twice(engine, "mcp-memory-service", db, "mms")
    assert db.read_bytes() == before  # opened read-only
    assert first["read"] == 3 and first["stored"] == 3
    assert first["skipped_reasons"] == {"deleted": 1, "superseded": 1}
    stored = {m.content: m for m in await _memories(engine, "mms")}
    assert not any("Biscuit" in c or "frozen on Fridays" in c for c in stored)
    staging = stored["The staging database is refreshed from production every Sunday night."]
    assert staging.tags == ("ops", "database") and staging.category == "note"
    assert staging.metadata["source"] == "cli" and staging.metadata["original_id"] == "h1"
    assert staging.occurred_at is not None and staging.occurred_at.isoformat().startswith("2026-01-02")
    assert any(
        "Terraform" in c
        for c in await _top(engine, "how do we provision infrastructure for new services?", "mms")
    )


async def test_mcp_memory_service_json_export(engine, tmp_path):
    path = tmp_path / "export.json"
    path.write_text(
        '{"export_metadata": {"exporter_version": "5.0.1"}, "memories": [{"content": "Grafana dashboards live in the '
        'observability repo.", "content_hash": "x1", "tags": ["monitoring"], "created_at": 1767312000.0, '
        '"memory_type": "reference", "metadata": {}}]}'
    )
    assert detect.detect(path)[0] == "mcp-memory-service"
    first, _ = await _twice(engine, "mcp-memory-service", path, "mmsj")
    assert first["stored"] == 1


@pytest.mark.parametrize("shape", ["results", "list", "page"])
async def test_mem0_get_all_in_each_shape(engine, tmp_path, shape):
    path = exports.write_mem0(tmp_path / "mem0.json", shape)
    assert detect.detect(path)[0] == "mem0"
    first, _ = await _twice(engine, "mem0", path, "m0")
    assert first["stored"] == 3
    stored = {m.content: m for m in await _memories(engine, "m0")}
    cello = stored["Plays cello in a community orchestra on Thursdays"]
    assert cello.tags == ("hobbies",) and cello.metadata["user_id"] == "maria"
    assert cello.metadata["original_id"] == "8d3f0c4e-1b2a-4c5d-9e8f-000000000002"
    assert "Is allergic to peanuts" in await _top(engine, "does the user have any food allergies?", "m0")


async def test_markdown_vault_with_and_without_front_matter(engine, tmp_path):
    vault = exports.write_vault(tmp_path / "vault")
    first, _ = await _twice(engine, "markdown", vault, "notes")
    assert first["skipped_reasons"] == {"hidden or template folder": 2}
    stored = {m.content: m for m in await _memories(engine, "notes")}
    assert "otters" not in "\n".join(stored)
    inbox = stored["Reading list: Finish Designing Data-Intensive Applications before the June offsite."]
    assert inbox.tags == () and inbox.occurred_at is None and inbox.metadata["note"] == "Inbox.md"
    decision = stored[
        "Project Atlas > Decisions: We chose PostGIS for the road graph; Alice Chen signed off on it."
    ]
    assert decision.tags == ("project", "infra") and decision.metadata["links"] == ["Alice Chen"]
    assert decision.occurred_at is not None and decision.occurred_at.date().isoformat() == "2026-03-02"
    offsite = stored["Offsite: The June offsite is in Scheveningen; book the train by May. #travel"]
    assert offsite.tags == ("planning", "offsite", "travel")  # "Tags: a, b" and an inline #tag
    assert offsite.occurred_at is not None and offsite.occurred_at.date().isoformat() == "2026-03-02"
    assert any("PostGIS" in c for c in await _top(engine, "which database holds the road graph?", "notes"))
    assert any("Scheveningen" in c for c in await _top(engine, "where is the June offsite?", "notes"))


async def test_claude_export_reads_blocks_attachments_projects_and_memories(engine, tmp_path):
    folder = exports.write_claude(tmp_path / "claude")
    first, _ = await _twice(engine, "claude", folder, "cl")
    text = "\n".join(await _contents(engine, "cl"))
    assert "pelicans" not in text  # thinking, also in the flat text field
    assert "incremental view maintenance" in text  # the attachment's extracted text
    assert "Dutch climate zone" in text and "tomatoes" in text  # the project's prompt and document
    assert "Amsterdam marathon" in text and "Delfgauw" in text  # the export's memories
    stored = {m.content: m for m in await _memories(engine, "cl")}
    prompt = stored[
        "Instructions for my Claude project Garden planner: Always give planting dates for the Dutch climate zone."
    ]
    assert prompt.category == "instructions"
    assert first["skipped_reasons"] == {"thinking": 1}
    assert any("marathon" in c for c in await _top(engine, "what race is Sam training for?", "cl"))


async def test_dry_run_stores_nothing(engine, tmp_path):
    path = exports.write_server_memory(tmp_path / "memory.jsonl")
    out = await _import(engine, "server-memory", path, "dry", dry_run=True)
    assert out["dry_run"] is True and out["to_import"] == 5 and out["stored"] == 0
    assert await _contents(engine, "dry") == []


def test_auto_detection_names_each_format(tmp_path):
    assert detect.detect(exports.write_chatgpt(tmp_path / "gpt"))[0] == "chatgpt"
    assert detect.detect(exports.write_chatgpt(tmp_path / "gpt") / "conversations.json")[0] == "chatgpt"
    assert detect.detect(exports.write_claude_code(tmp_path / "cc"))[0] == "claude-code"
    assert detect.detect(exports.write_server_memory(tmp_path / "memory.jsonl"))[0] == "server-memory"
    assert detect.detect(exports.write_mcp_memory_service(tmp_path / "m.db"))[0] == "mcp-memory-service"
    assert detect.detect(exports.write_vault(tmp_path / "vault"))[0] == "markdown"
    assert detect.detect(exports.write_claude(tmp_path / "claude"))[0] == "claude"
    ours = tmp_path / "ours.jsonl"
    ours.write_text('{"content": "a memory", "project": "p"}\n')
    assert detect.detect(ours)[0] == "memlane"
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    with pytest.raises(InvalidInput, match="cannot tell which export"):
        detect.detect(odd)


def test_a_file_of_another_format_says_what_was_expected_and_found(tmp_path):
    mem0 = exports.write_mem0(tmp_path / "mem0.json")
    with pytest.raises(WrongFormat) as e:
        list(READERS["chatgpt"].read(mem0))
    assert "expected conversations.json" in str(e.value) and "found a JSON object with keys results" in str(
        e.value
    )
    graph = exports.write_server_memory(tmp_path / "memory.jsonl")
    with pytest.raises(
        WrongFormat,
        match="expected a Claude Code session .jsonl.*found line 1: a JSON object with keys entityType",
    ):
        list(READERS["claude-code"].read(graph))
    other = tmp_path / "other.db"
    sqlite3.connect(other).executescript("CREATE TABLE notes (id INTEGER, body TEXT);").close()
    with pytest.raises(WrongFormat, match="found a SQLite database with tables notes"):
        list(READERS["mcp-memory-service"].read(other))
    with pytest.raises(WrongFormat, match="expected JSONL lines"):
        list(READERS["server-memory"].read(mem0))


async def test_chatgpt_split_export_files_are_read_from_their_folder(engine, tmp_path):
    folder = tmp_path / "split"
    folder.mkdir()
    first, second = exports.chatgpt_conversations()
    (folder / "conversations-000.json").write_text(json.dumps([first]))
    (folder / "conversations-001.json").write_text(json.dumps([second]))
    assert detect.detect(folder) == (
        "chatgpt",
        "2 conversations file(s) with message trees (mapping, current_node)",
    )
    report = await _import(engine, "chatgpt", folder, "split")
    assert report["conversations"] == 2
    assert any("Mila" in c for c in await _contents(engine, "split"))


def test_a_claude_export_named_as_chatgpt_is_refused_with_its_shape(tmp_path):
    folder = exports.write_claude(tmp_path / "claude")
    with pytest.raises(WrongFormat) as e:
        list(READERS["chatgpt"].read(folder / "conversations.json"))
    assert "found a JSON list whose first item is a JSON object with keys account, chat_messages" in str(
        e.value
    )


async def test_an_import_run_again_after_an_interruption_ingests_only_the_rest(engine, tmp_path):
    whole = exports.chatgpt_conversations()
    part = tmp_path / "part"
    part.mkdir()
    (part / "conversations.json").write_text(json.dumps(whole[:1]))
    await _import(engine, "chatgpt", part, "resume")
    before = len(await _contents(engine, "resume"))
    full = exports.write_chatgpt(tmp_path / "full")
    again = await _import(engine, "chatgpt", full, "resume")
    assert again["already_imported"] == 1 and again["stored"] >= 1
    after = await _contents(engine, "resume")
    assert len(after) == before + again["stored"] and any("Mila" in c for c in after)
