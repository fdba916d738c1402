"""``memlane setup claude-code``: through the real ``claude`` CLI when it is on PATH (the pinned
@anthropic-ai/claude-code from package.json, against a temporary home, offline), and by editing
``~/.claude.json`` when it is not. A stand-in ``claude`` (a script that logs its arguments) checks
what memlane does when the CLI fails or must not run at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import ROOT
from support.setup_cli import backups, make_host, run_setup, this_memlane

from memlane.server.cli.clients import Host, config_path

CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
CLAUDE_JSON = {
    "numStartups": 12,
    "mcpServers": {
        "github": {
            "type": "stdio",
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "test-token"},
        }
    },
    "projects": {"/home/ana/src/app": {"allowedTools": []}},
}
# Nothing leaves the machine: no telemetry, no update check, no other traffic.
QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def _claude_json(host: Host) -> dict:
    return json.loads(config_path("claude-code", host).read_text())


def test_without_the_cli_claude_json_is_edited_like_the_cli_would(tmp_path):
    host = make_host(tmp_path)
    path = config_path("claude-code", host)
    path.write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n")
    r = run_setup(host, "claude-code", "--project", "acme")
    assert r.code == 0 and "added to Claude Code" in r.out and "claude CLI" not in r.out
    data = _claude_json(host)
    assert data["mcpServers"].pop("memlane") == {
        "type": "stdio",
        "command": this_memlane(),
        "args": ["serve"],
        "env": {"MEMLANE_DEFAULT_PROJECT": "acme"},
    }
    assert data == CLAUDE_JSON


def _stand_in(tmp_path: Path, *, fail_on: str) -> tuple[Host, Path]:
    """A ``claude`` that logs each call; ``mcp remove`` empties mcpServers (as the real one would
    remove the entry); the subcommand ``fail_on`` exits 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "claude-calls.jsonl"
    script = bin_dir / "claude"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "path = os.path.join(os.environ['HOME'], '.claude.json')\n"
        f"if sys.argv[2] == {fail_on!r}:\n"
        "    sys.exit('Error: stand-in refuses')\n"
        "if sys.argv[2] == 'remove':\n"
        "    data = json.load(open(path)); data['mcpServers'] = {}\n"
        "    json.dump(data, open(path, 'w'))\n"
    )
    script.chmod(0o755)
    host = make_host(tmp_path)
    return Host(host.home, host.platform, {**host.environ, "PATH": str(bin_dir)}), log


def test_a_failing_add_after_the_remove_puts_the_file_back(tmp_path):
    host, log = _stand_in(tmp_path, fail_on="add")
    path = config_path("claude-code", host)
    data = json.loads(json.dumps(CLAUDE_JSON))
    data["mcpServers"]["memlane"] = {"type": "stdio", "command": "/old/memlane", "args": ["serve"], "env": {}}
    path.write_text(json.dumps(data, indent=2))
    before = path.read_bytes()
    r = run_setup(host, "claude-code", "--project", "acme")
    assert r.code == 1 and "stand-in refuses" in r.err and "restored" in r.err
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c[:2] for c in calls] == [["mcp", "remove"], ["mcp", "add"]]
    assert calls[1] == [
        "mcp", "add", "--scope", "user", "memlane", "-e", "MEMLANE_DEFAULT_PROJECT=acme", "--", this_memlane(), "serve",
    ]  # fmt: skip
    assert path.read_bytes() == before


def test_a_claude_json_that_is_not_json_is_refused_before_the_cli_runs(tmp_path):
    host, log = _stand_in(tmp_path, fail_on="never")
    path = config_path("claude-code", host)
    path.write_text('{"mcpServers": {')
    r = run_setup(host, "claude-code")
    assert r.code == 1 and "not valid JSON" in r.err
    assert not log.exists() and path.read_text() == '{"mcpServers": {'


# --- the real CLI --------------------------------------------------------------------------------

real_cli = pytest.mark.skipif(
    not CLAUDE.exists(),
    reason=f"the claude CLI is not installed ({CLAUDE}; `make node_modules/.bin/mcp-inspector`)",
)


def _real_host(tmp_path: Path) -> Host:
    host = make_host(tmp_path)
    return Host(
        host.home,
        host.platform,
        {**host.environ, **QUIET, "PATH": f"{CLAUDE.parent}{os.pathsep}/usr/bin:/bin"},
    )


@real_cli
@pytest.mark.slow
def test_the_real_claude_cli_adds_updates_and_removes_memlane(tmp_path):
    host = _real_host(tmp_path)
    path = config_path("claude-code", host)
    path.write_text(json.dumps(CLAUDE_JSON, indent=2) + "\n")
    original = path.read_bytes()

    r = run_setup(host, "claude-code", "--project", "acme", "--data-dir", str(tmp_path / "data"))
    assert r.code == 0, r.err
    assert f"with the claude CLI ({CLAUDE})" in r.out
    data = _claude_json(host)
    assert data["mcpServers"]["memlane"] == {
        "type": "stdio",
        "command": this_memlane(),
        "args": ["serve"],
        "env": {"MEMLANE_DEFAULT_PROJECT": "acme", "MEMLANE_DATA_DIR": str(tmp_path / "data")},
    }
    # The CLI rewrites the file itself (adding its own first-run keys); ours are kept.
    assert data["mcpServers"]["github"] == CLAUDE_JSON["mcpServers"]["github"]
    assert data["projects"] == CLAUDE_JSON["projects"] and data["numStartups"] == 12
    (saved,) = backups(path)
    assert saved.read_bytes() == original
    got = subprocess.run(
        [str(CLAUDE), "mcp", "get", "memlane"],
        env=dict(host.environ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        "User config" in got.stdout
        and this_memlane() in got.stdout
        and "MEMLANE_DEFAULT_PROJECT=acme" in got.stdout
    )

    added = path.read_bytes()
    r = run_setup(host, "claude-code", "--project", "acme", "--data-dir", str(tmp_path / "data"))
    assert r.code == 0 and "already configured" in r.out
    assert path.read_bytes() == added and len(backups(path)) == 1

    r = run_setup(host, "claude-code", "--project", "zephyr", "--dry-run")
    assert r.code == 0 and "claude mcp remove --scope user memlane" in r.out.replace(str(CLAUDE), "claude")
    assert path.read_bytes() == added

    r = run_setup(host, "claude-code", "--project", "zephyr")
    assert r.code == 0 and "updated in Claude Code" in r.out
    assert _claude_json(host)["mcpServers"]["memlane"]["env"] == {"MEMLANE_DEFAULT_PROJECT": "zephyr"}

    r = run_setup(host, "--list")
    assert (
        f"user scope; edited with {CLAUDE}" in r.out and f"command: {this_memlane()} serve (exists)" in r.out
    )

    r = run_setup(host, "claude-code", "--remove")
    assert r.code == 0 and "removed from Claude Code" in r.out
    assert list(_claude_json(host)["mcpServers"]) == ["github"]
    r = run_setup(host, "claude-code", "--remove")
    assert r.code == 0 and "not configured" in r.out
