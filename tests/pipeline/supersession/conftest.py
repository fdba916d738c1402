"""What the supersession tests share: the command line on the test's database, and a memory
superseded by a newer one."""

from __future__ import annotations

import json

import pytest

from memlane.server.cli.main import main


@pytest.fixture
def cli(settings, capsys, monkeypatch):
    """``cli(*argv)``: memlane's command line on this test's database; its JSON result (the last
    line of stdout)."""
    monkeypatch.setenv("MEMLANE_DATABASE__URL", settings.database.url.get_secret_value())

    def run(*argv: str) -> dict:
        assert main(list(argv)) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    return run


@pytest.fixture
def maya(engine):
    """``await maya()``: Maya's home in Lisbon (2024), superseded by her move to Berlin (2025)."""

    async def make():
        lisbon = await engine.remember(
            {"content": "Maya lives in Lisbon", "project": "p", "occurred_at": "2024-01-10"}
        )
        berlin = await engine.remember(
            {"content": "Maya moved to Berlin for her new job", "project": "p", "occurred_at": "2025-06-01"}
        )
        assert [s.id for s in berlin.supersedes] == [lisbon.id]
        return lisbon, berlin

    return make
