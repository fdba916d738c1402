"""``memlane bench import``: the generated export is the shape the ChatGPT importer reads, and a
small run reports two imports of which the second stores nothing."""

from __future__ import annotations

import asyncio
import json

import pytest

from memlane.bench import importbench
from memlane.pipeline.importers import chatgpt
from memlane.pipeline.importers.records import Conversation, Fact, Skip
from memlane.server.settings import load


def test_the_generated_export_has_the_messages_asked_for_and_one_abandoned_branch_each(tmp_path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(importbench.generate(50, per_conversation=20)))
    records = list(chatgpt.read(path))
    conversations = [r for r in records if isinstance(r, Conversation)]
    assert [len(c.messages) for c in conversations] == [20, 20, 10]
    assert sum(r.count for r in records if isinstance(r, Skip) and r.reason == "abandoned branch") == 6
    assert sum(1 for r in records if isinstance(r, Fact)) == 6  # the custom instructions, twice each


@pytest.fixture
def bench_settings(database_url, tmp_path):
    return load(data_dir=tmp_path, database={"url": database_url})


def test_a_small_run_imports_once(bench_settings, embedder):
    result = asyncio.run(importbench.run(bench_settings, 40, embedder=embedder, show_progress=False))
    first, second = result["runs"]["first"], result["runs"]["second"]
    assert result["benchmark"] == "import" and first["read"] == second["read"] == 44
    assert first["stored"] > 0 and second["stored"] == 0 and second["already_imported"] == 2
    assert "| second |" in importbench.markdown(result)
