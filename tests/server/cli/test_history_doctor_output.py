"""``memlane history`` and ``memlane doctor`` print for a person (not one line of JSON); ``--json``
gives scripts the report as before."""

from __future__ import annotations

import json

from support.processes import free_port

from memlane.pipeline.store.handles import handle_of


def remember(cli, content: str, *argv: str) -> str:
    code, out, err = cli("remember", content, "--project", "tidepool", *argv)
    assert code == 0, err
    return json.loads(out)["id"]


def test_history_prints_the_chain_for_a_person(cli):
    old = remember(cli, "Tidepool caches with redis", "--occurred-at", "2026-01-10")
    new = remember(cli, "Tidepool caches with sled", "--occurred-at", "2026-03-02")
    assert cli("supersede", old, new)[0] == 0
    assert cli("update", new, "--content", "Tidepool caches with sled, since March")[0] == 0

    code, out, err = cli("history", new)
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) > 5 and not out.lstrip().startswith("{")
    assert lines[0] == f"Memory {handle_of(new)}: current"
    assert "  Tidepool caches with sled, since March" in lines
    versions = lines.index("Earlier contents, replaced by updates (1, oldest first):")
    assert lines[versions + 2].strip() == "Tidepool caches with sled"
    replaced = lines.index("Memories it replaced (1, newest first):")
    assert lines[replaced + 1].strip() == f"{old}  from 2026-01-10 until 2026-03-02"
    assert lines[replaced + 2].strip() == "Tidepool caches with redis"
    assert f"`memlane unsupersede {handle_of(old)}` makes it current again" in out

    code, out, _ = cli("history", old)
    assert code == 0
    assert out.splitlines()[0] == f"Memory {handle_of(old)}: replaced"
    assert f"replaced by {handle_of(new)} on 2026-03-02" in out
    assert f"Current version of this fact: {new}\n  Tidepool caches with sled, since March" in out

    code, out, _ = cli("history", old, "--json")
    h = json.loads(out)
    assert h["memory"]["id"] == old and h["superseded_by"]["id"] == new


def test_history_of_a_memory_with_no_past_says_so(cli):
    mid = remember(cli, "Standup is at nine")
    code, out, _ = cli("history", mid)
    assert code == 0
    assert "No earlier versions: it was never updated, and it replaced no other memory." in out


def test_doctor_prints_one_line_per_check_and_json_on_request(cli):
    remember(cli, "Standup is at nine")
    code, out, err = cli("doctor")
    assert code == 0, err
    lines = out.strip().splitlines()
    checks = {line.split()[1]: line.split()[0] for line in lines[:-2]}
    assert checks["database"] == checks["model"] == checks["embedding"] == checks["prompts"] == "ok"
    assert checks["last"] == "warning"  # no backup yet
    assert "1 memory" in lines[0] and "PostgreSQL" in lines[0]
    assert lines[-1] == "All checks passed (1 warning)."
    code, out, _ = cli("doctor", "--json")
    report = json.loads(out)
    assert code == 0 and report["status"] == "ok" and report["memories"] == 1


def test_doctor_marks_a_failed_check_and_exits_1(cli, settings, monkeypatch):
    remember(cli, "Standup is at nine")
    monkeypatch.setattr("memlane.pipeline.llm.prompts.unlocked_or_changed", lambda: ([], ["rerank@v1"]))
    code, out, _ = cli("doctor")
    assert code == 1
    assert any(
        line.split()[:2] == ["fail", "prompts"] and "released prompt versions edited: rerank@v1" in line
        for line in out.splitlines()
    ), out
    assert out.strip().splitlines()[-1].startswith("Problems found: 1 failed")


def test_doctor_without_a_database_fails_that_check_and_still_checks_the_rest(cli, monkeypatch):
    monkeypatch.setenv("MEMLANE_DATABASE__URL", f"postgresql://memlane@127.0.0.1:{free_port()}/nothing")
    monkeypatch.setenv("MEMLANE_DATABASE__CONNECT_TIMEOUT", "3")
    code, out, _ = cli("doctor")
    assert code == 1
    status = {line.split()[1]: line.split()[0] for line in out.strip().splitlines()[:-2]}
    assert status["database"] == "fail" and "connect" in out.splitlines()[0]
    assert "model" not in status  # nothing to compare without the store
    assert status["embedding"] == status["prompts"] == "ok"
