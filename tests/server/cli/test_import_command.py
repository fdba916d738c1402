"""``memlane import PATH --from FORMAT``: detection said, the summary line, --json counts,
--dry-run, and a wrong format refused with what was expected and found."""

from __future__ import annotations

import json

from support import exports

from memlane.pipeline.importers import FORMATS
from memlane.server.cli.main import IMPORT_FORMATS


def test_the_parser_offers_every_importer():
    assert IMPORT_FORMATS == FORMATS


def test_auto_import_says_what_it_detected_and_a_second_run_adds_nothing(cli, tmp_path):
    vault = exports.write_vault(tmp_path / "vault")
    code, out, _ = cli("import", str(vault), "--project", "notes")
    assert code == 0
    assert out.strip() == (
        "imported markdown (a folder of 3 Markdown note(s) (an Obsidian vault)): read 5, stored 5, "
        "duplicate 0, filtered 0, skipped 2 (hidden or template folder 2)"
    )
    code, out, _ = cli("import", str(vault), "--project", "notes", "--from", "markdown", "--json")
    assert code == 0
    report = json.loads(out)
    assert report == {
        "format": "markdown",
        "read": 5,
        "stored": 0,
        "duplicate": 5,
        "filtered": 0,
        "skipped": 2,
        "skipped_reasons": {"hidden or template folder": 2},
    }


def test_dry_run_counts_and_stores_nothing(cli, tmp_path):
    path = exports.write_mem0(tmp_path / "mem0.json")
    code, out, _ = cli("import", str(path), "--dry-run", "--json", "--project", "dry")
    assert code == 0
    report = json.loads(out)
    assert report["dry_run"] is True and report["to_import"] == 3 and report["stored"] == 0
    code, out, _ = cli("recall", "peanut allergy", "--project", "dry", "--json")
    assert code == 0 and json.loads(out)["memories"] == []


def test_a_file_that_is_not_the_format_named_is_refused(cli, tmp_path):
    path = exports.write_mem0(tmp_path / "mem0.json")
    code, out, err = cli("import", str(path), "--from", "chatgpt")
    assert code == 1 and out == ""
    assert "is not a chatgpt export: expected conversations.json" in err
    assert "found a JSON object with keys results" in err


def test_memlane_jsonl_dry_run_validates_and_stores_nothing(cli, tmp_path):
    ours = tmp_path / "ours.jsonl"
    ours.write_text(
        '{"content": "Erin runs the Thursday design review", "project": "dry2"}\n'
        '{"content": "Frank is on call this week", "project": "dry2"}\n'
    )
    code, out, _ = cli("import", str(ours), "--dry-run", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["format"] == "memlane" and report["read"] == 2 and report["to_import"] == 2
    assert report["stored"] == 0 and report["dry_run"] is True
    code, out, _ = cli("recall", "who is on call?", "--project", "dry2", "--json")
    assert code == 0 and json.loads(out)["memories"] == []
