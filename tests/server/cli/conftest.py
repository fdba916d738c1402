from __future__ import annotations

import pytest

from memlane.server.cli.main import main


@pytest.fixture
def cli(settings, capsys, monkeypatch):
    """``cli(*argv)``: ``memlane *argv`` in process on the test's database; (exit code, stdout, stderr)."""
    monkeypatch.setenv("MEMLANE_DATABASE__URL", settings.database.url.get_secret_value())

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
