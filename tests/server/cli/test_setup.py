"""``memlane setup CLIENT``: each client's config file under a temporary home (Linux, macOS and
Windows layouts), with the files users have (other servers, other top-level keys): add, update,
an idempotent second run, remove, refusals that leave the file's bytes alone, backups, --dry-run,
--print, --list, and the real ``memlane`` console script as a subprocess. No database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.processes import MEMLANE
from support.setup_cli import backups, make_host, run_setup, this_memlane

from memlane.server.cli.clients import CLIENTS, Host, config_path
from memlane.server.cli.main import SETUP_CLIENTS

# What users' files look like: another server, and the client's other keys.
CLAUDE_DESKTOP = """{
    "globalShortcut": "Alt+Space",
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/ana/Documents"]
        }
    },
    "isUsingBuiltInNodeForMcp": true
}
"""
VSCODE = """{
\t"inputs": [
\t\t{"type": "promptString", "id": "github-token", "description": "GitHub token", "password": true}
\t],
\t"servers": {
\t\t"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}
\t}
}
"""
CURSOR = """{
  "mcpServers": {
    "context7": {
      "command": "npx",
      "args": ["-y", "@upstash/context7-mcp"]
    }
  }
}
"""
WINDSURF = """{
  "mcpServers": {
    "git": {
      "command": "uvx",
      "args": ["mcp-server-git"],
      "disabled": false,
      "env": {}
    }
  }
}
"""
CLAUDE_CODE = """{
  "numStartups": 12,
  "mcpServers": {
    "github": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "test-token"}
    }
  },
  "projects": {"/home/ana/src/app": {"allowedTools": []}}
}
"""
EXISTING = {
    "claude-desktop": CLAUDE_DESKTOP,
    "claude-code": CLAUDE_CODE,
    "cursor": CURSOR,
    "vscode": VSCODE,
    "windsurf": WINDSURF,
}


def existing(host: Host, client: str) -> Path:
    path = config_path(client, host)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(EXISTING[client])
    return path


def servers_of(path: Path, client: str) -> dict:
    return json.loads(path.read_text())[CLIENTS[client].key]


@pytest.fixture
def host(tmp_path) -> Host:
    return make_host(tmp_path)


def test_the_parsers_clients_are_the_clients_setup_knows():
    assert list(SETUP_CLIENTS) == list(CLIENTS)


# --- where the files are -------------------------------------------------------------------------


def test_linux_paths_follow_xdg_config_home(tmp_path):
    host = make_host(tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert config_path("claude-desktop", host) == tmp_path / "xdg/Claude/claude_desktop_config.json"
    assert config_path("vscode", host) == tmp_path / "xdg/Code/User/mcp.json"


def test_linux_paths_default_to_dot_config_and_ignore_a_relative_xdg_config_home(tmp_path):
    host = make_host(tmp_path, XDG_CONFIG_HOME="relative/dir")
    home = host.home
    assert config_path("claude-desktop", host) == home / ".config/Claude/claude_desktop_config.json"
    assert config_path("vscode", host) == home / ".config/Code/User/mcp.json"
    assert config_path("cursor", host) == home / ".cursor/mcp.json"
    assert config_path("windsurf", host) == home / ".codeium/windsurf/mcp_config.json"
    assert config_path("claude-code", host) == home / ".claude.json"


def test_macos_paths_are_under_application_support(tmp_path):
    host = make_host(tmp_path, "darwin")
    support = host.home / "Library/Application Support"
    assert config_path("claude-desktop", host) == support / "Claude/claude_desktop_config.json"
    assert config_path("vscode", host) == support / "Code/User/mcp.json"
    assert config_path("cursor", host) == host.home / ".cursor/mcp.json"


def test_windows_paths_are_under_appdata(tmp_path):
    host = make_host(tmp_path, "win32", APPDATA=str(tmp_path / "Roaming"))
    assert config_path("claude-desktop", host) == tmp_path / "Roaming/Claude/claude_desktop_config.json"
    assert config_path("vscode", host) == tmp_path / "Roaming/Code/User/mcp.json"
    assert config_path("windsurf", host) == host.home / ".codeium/windsurf/mcp_config.json"


def test_claude_code_follows_claude_config_dir(tmp_path):
    host = make_host(tmp_path, CLAUDE_CONFIG_DIR=str(tmp_path / "cc"))
    assert config_path("claude-code", host) == tmp_path / "cc/.claude.json"


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_setup_writes_where_the_platform_keeps_the_file(tmp_path, platform):
    host = make_host(tmp_path, platform, APPDATA=str(tmp_path / "AppData/Roaming"))
    r = run_setup(host, "claude-desktop", "--project", "acme")
    assert r.code == 0, r.err
    path = config_path("claude-desktop", host)
    assert str(path) in r.out
    entry = servers_of(path, "claude-desktop")["memlane"]
    assert entry["env"] == {"MEMLANE_DEFAULT_PROJECT": "acme"}


# --- add, update, again, remove ------------------------------------------------------------------


@pytest.mark.parametrize("client", list(CLIENTS))
def test_setup_adds_one_entry_and_keeps_the_rest_of_the_file(host, client):
    path = existing(host, client)
    before = path.read_bytes()
    r = run_setup(host, client, "--project", "acme")
    assert r.code == 0, r.err
    assert "added to" in r.out and str(path) in r.out and "next:" in r.out
    old, new = json.loads(before), json.loads(path.read_text())
    key = CLIENTS[client].key
    entry = new[key].pop("memlane")
    assert new == old and list(new) == list(old) and list(new[key]) == list(old[key])
    expected = {"command": this_memlane(), "args": ["serve"], "env": {"MEMLANE_DEFAULT_PROJECT": "acme"}}
    if CLIENTS[client].typed:
        expected = {"type": "stdio", **expected}
    assert entry == expected and list(entry) == list(expected)
    # Every line of the old file is still there as it was (the other server's one-line args too),
    # but for the comma after what was the last server.
    now = set(path.read_text().splitlines())
    assert all(line in now or line + "," in now for line in before.decode().splitlines())
    (saved,) = backups(path)
    assert saved.read_bytes() == before


@pytest.mark.parametrize("client", list(CLIENTS))
def test_a_second_identical_run_is_already_configured_and_writes_nothing(host, client):
    path = existing(host, client)
    assert run_setup(host, client, "--project", "acme").code == 0
    after_first, stat_first, saved = path.read_bytes(), path.stat(), backups(path)
    r = run_setup(host, client, "--project", "acme")
    assert r.code == 0 and "already configured" in r.out
    assert path.read_bytes() == after_first and path.stat().st_mtime_ns == stat_first.st_mtime_ns
    assert backups(path) == saved


def test_a_changed_project_updates_the_entry_and_keeps_what_the_user_added_to_it(host):
    path = existing(host, "windsurf")
    assert run_setup(host, "windsurf", "--project", "acme", "--data-dir", "/srv/memlane").code == 0
    data = json.loads(path.read_text())
    data["mcpServers"]["memlane"]["disabled"] = False
    data["mcpServers"]["memlane"]["env"]["MEMLANE_LOG_LEVEL"] = "DEBUG"
    path.write_text(json.dumps(data, indent=2) + "\n")
    before = path.read_bytes()
    r = run_setup(host, "windsurf", "--project", "zephyr")
    assert r.code == 0, r.err
    assert "updated in" in r.out
    entry = servers_of(path, "windsurf")["memlane"]
    # --data-dir not given this time: MEMLANE_DATA_DIR goes; the user's variable and key stay.
    assert entry["env"] == {"MEMLANE_LOG_LEVEL": "DEBUG", "MEMLANE_DEFAULT_PROJECT": "zephyr"}
    assert entry["disabled"] is False and list(entry)[:2] == ["command", "args"]
    assert servers_of(path, "windsurf")["git"] == json.loads(WINDSURF)["mcpServers"]["git"]
    assert backups(path)[-1].read_bytes() == before


def test_an_http_memlane_entry_is_replaced_by_the_stdio_one(host):
    path = config_path("vscode", host)
    path.parent.mkdir(parents=True)
    path.write_text('{"servers": {"memlane": {"type": "http", "url": "http://127.0.0.1:8765/mcp"}}}\n')
    assert run_setup(host, "vscode").code == 0
    assert servers_of(path, "vscode")["memlane"] == {
        "type": "stdio",
        "command": this_memlane(),
        "args": ["serve"],
    }


@pytest.mark.parametrize("client", list(CLIENTS))
def test_remove_takes_out_only_memlane_and_gives_back_the_original_bytes(host, client):
    path = existing(host, client)
    original = path.read_bytes()
    assert run_setup(host, client, "--project", "acme").code == 0
    added = path.read_bytes()
    r = run_setup(host, client, "--remove")
    assert r.code == 0 and "removed from" in r.out
    assert path.read_bytes() == original
    assert backups(path)[-1].read_bytes() == added


def test_remove_when_not_configured_says_so_and_writes_nothing(host):
    path = existing(host, "cursor")
    before = path.read_bytes()
    r = run_setup(host, "cursor", "--remove")
    assert r.code == 0 and "not configured" in r.out
    assert path.read_bytes() == before and backups(path) == []
    r = run_setup(host, "windsurf", "--remove")  # no file at all: none is made
    assert r.code == 0 and "not configured" in r.out
    assert not config_path("windsurf", host).parent.exists()


def test_a_missing_file_is_created_with_its_directories_and_no_backup(host):
    path = config_path("windsurf", host)
    r = run_setup(host, "windsurf", "--data-dir", "/srv/memlane")
    assert r.code == 0 and "new file" in r.out
    assert json.loads(path.read_text()) == {
        "mcpServers": {
            "memlane": {
                "command": this_memlane(),
                "args": ["serve"],
                "env": {"MEMLANE_DATA_DIR": "/srv/memlane"},
            }
        }
    }
    assert path.read_text().startswith('{\n  "mcpServers": {\n    "memlane": {\n')
    assert backups(path) == []
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as an editor would make it, not mkstemp's 0600


def test_an_empty_file_and_an_empty_server_map_get_the_entry(host):
    path = config_path("cursor", host)
    path.parent.mkdir(parents=True)
    path.write_text("")
    assert run_setup(host, "cursor").code == 0
    assert list(servers_of(path, "cursor")) == ["memlane"]
    path.write_text('{"mcpServers": {}}')  # one line: the entry goes on that line
    assert run_setup(host, "cursor").code == 0
    assert "\n" not in path.read_text() and list(servers_of(path, "cursor")) == ["memlane"]


def test_tabs_crlf_and_a_byte_order_mark_are_kept(host):
    path = config_path("vscode", host)
    path.parent.mkdir(parents=True)
    original = b"\xef\xbb\xbf" + VSCODE.replace("\n", "\r\n").encode()
    path.write_bytes(original)
    assert run_setup(host, "vscode", "--project", "acme").code == 0
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\n" not in raw.replace(b"\r\n", b"")
    assert b'\r\n\t\t"memlane": {\r\n\t\t\t"type": "stdio",\r\n' in raw
    assert run_setup(host, "vscode", "--remove").code == 0
    assert path.read_bytes() == original


def test_a_symlinked_config_is_written_through_the_link_and_keeps_its_mode(host, tmp_path):
    target = tmp_path / "dotfiles" / "mcp.json"
    target.parent.mkdir()
    target.write_text(CURSOR)
    target.chmod(0o640)
    link = config_path("cursor", host)
    link.parent.mkdir(parents=True)
    link.symlink_to(target)
    assert run_setup(host, "cursor").code == 0
    assert link.is_symlink() and "memlane" in servers_of(target, "cursor")
    assert target.stat().st_mode & 0o777 == 0o640


# --- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", list(CLIENTS))
def test_invalid_json_is_refused_and_the_file_left_as_it_was(host, client):
    path = config_path(client, host)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"mcpServers": {"a": {"command": "x",}\n')
    before = path.read_bytes()
    r = run_setup(host, client, "--project", "acme")
    assert r.code == 1
    assert str(path) in r.err and "not valid JSON" in r.err and f"memlane setup {client} --print" in r.err
    assert path.read_bytes() == before and backups(path) == []
    assert run_setup(host, client, "--remove").code == 1 and path.read_bytes() == before


def test_vscode_comments_are_refused_with_the_reason_and_a_way_out(host):
    path = config_path("vscode", host)
    path.parent.mkdir(parents=True)
    path.write_text(VSCODE.replace('\t"servers": {', '\t// servers for this profile\n\t"servers": {'))
    before = path.read_bytes()
    r = run_setup(host, "vscode")
    assert r.code == 1
    assert "comments or trailing commas" in r.err and "memlane setup vscode --print" in r.err
    assert path.read_bytes() == before and backups(path) == []


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('["not", "an", "object"]\n', "JSON list, not an object"),
        ('{"mcpServers": ["memlane"]}\n', "'mcpServers' is a JSON list, not an object of servers"),
    ],
)
def test_a_top_level_or_server_map_that_is_not_an_object_is_refused(host, text, says):
    path = config_path("claude-desktop", host)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    r = run_setup(host, "claude-desktop")
    assert r.code == 1 and says in r.err
    assert path.read_text() == text and backups(path) == []


# --- --dry-run, --print, --list ------------------------------------------------------------------


def test_dry_run_shows_the_diff_and_changes_nothing(host):
    path = existing(host, "claude-desktop")
    before = path.read_bytes()
    r = run_setup(host, "claude-desktop", "--project", "acme", "--dry-run")
    assert r.code == 0 and "nothing was changed" in r.out
    assert f"--- {path}" in r.out and '+        "memlane": {' in r.out
    assert '+                "MEMLANE_DEFAULT_PROJECT": "acme"' in r.out
    assert not any(line.startswith("-") and "filesystem" in line for line in r.out.splitlines())
    assert path.read_bytes() == before and backups(path) == []


def test_dry_run_of_a_new_file_shows_it_and_creates_nothing(host):
    r = run_setup(host, "cursor", "--dry-run")
    assert r.code == 0 and "would create" in r.out and '"memlane": {' in r.out
    assert not (host.home / ".cursor").exists()


@pytest.mark.parametrize("client", list(CLIENTS))
def test_print_outputs_only_the_json_to_paste_and_touches_no_file(host, client):
    r = run_setup(host, client, "--project", "acme")  # writes the file...
    path = config_path(client, host)
    before = path.read_bytes()
    r = run_setup(host, client, "--print", "--project", "other")  # ...which --print leaves alone
    assert r.code == 0
    snippet = json.loads(r.out)
    entry = snippet[CLIENTS[client].key]["memlane"]
    assert entry["command"] == this_memlane() and entry["env"]["MEMLANE_DEFAULT_PROJECT"] == "other"
    assert str(path) in r.err  # where to paste it: on stderr, not in the JSON
    assert path.read_bytes() == before


def test_list_says_for_every_client_whether_and_how_memlane_is_configured(host):
    assert run_setup(host, "cursor").code == 0
    path = config_path("windsurf", host)
    path.parent.mkdir(parents=True)
    path.write_text('{"mcpServers": {"memlane": {"command": "/nowhere/memlane", "args": ["serve"]}}}')
    vscode = config_path("vscode", host)
    vscode.parent.mkdir(parents=True)
    vscode.write_text("{ // a comment\n}")
    r = run_setup(host, "--list")
    assert r.code == 0
    lines = {line.split()[0]: line for line in r.out.splitlines() if not line.startswith(" ")}
    assert set(lines) == set(CLIENTS)
    assert "configured" in lines["cursor"] and str(config_path("cursor", host)) in lines["cursor"]
    assert f"command: {this_memlane()} serve (exists)" in r.out
    assert "command: /nowhere/memlane serve (MISSING" in r.out
    assert "unreadable" in lines["vscode"]
    assert "not configured" in lines["claude-desktop"] and "no such file" in lines["claude-desktop"]
    assert "claude CLI not on PATH" in lines["claude-code"]


# --- flags ---------------------------------------------------------------------------------------


def test_data_dir_is_made_absolute_and_the_top_level_one_is_used_when_setup_has_none(
    host, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    path = config_path("cursor", host)
    assert run_setup(host, "cursor", top=("--data-dir", "top-dir")).code == 0
    assert servers_of(path, "cursor")["memlane"]["env"] == {"MEMLANE_DATA_DIR": str(tmp_path / "top-dir")}
    assert run_setup(host, "cursor", "--data-dir", "own-dir", top=("--data-dir", "top-dir")).code == 0
    assert servers_of(path, "cursor")["memlane"]["env"] == {"MEMLANE_DATA_DIR": str(tmp_path / "own-dir")}
    assert run_setup(host, "cursor", "--data-dir", "~/memlane-data").code == 0
    assert servers_of(path, "cursor")["memlane"]["env"] == {
        "MEMLANE_DATA_DIR": str(host.home / "memlane-data")
    }


def test_a_top_level_config_file_goes_into_the_entry_and_must_exist(host, tmp_path):
    config = tmp_path / "memlane.toml"
    r = run_setup(host, "cursor", top=("--config", str(config)))
    assert r.code == 1 and "no such file" in r.err and not config_path("cursor", host).exists()
    config.write_text("[recall]\n")
    assert run_setup(host, "cursor", top=("--config", str(config))).code == 0
    assert servers_of(config_path("cursor", host), "cursor")["memlane"]["env"] == {
        "MEMLANE_CONFIG": str(config)
    }


def test_a_data_dir_of_this_shell_is_pointed_out_since_the_client_will_not_see_it(tmp_path):
    host = make_host(tmp_path, MEMLANE_DATA_DIR="/srv/shell-only")
    r = run_setup(host, "cursor")
    assert r.code == 0 and "MEMLANE_DATA_DIR is set here" in r.out
    assert "env" not in servers_of(config_path("cursor", host), "cursor")["memlane"]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ((), "choose a client"),
        (("--list", "--project", "x"), "--list takes none of"),
        (("cursor", "--print", "--dry-run"), "--print changes nothing"),
        (("cursor", "--project", " "), "--project needs a name"),
    ],
)
def test_usage_errors_exit_2_and_change_nothing(host, argv, says):
    r = run_setup(host, *argv)
    assert r.code == 2 and says in r.err
    assert list(host.home.iterdir()) == []


# --- the real command ----------------------------------------------------------------------------


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMLANE_", "XDG_", "CLAUDE_"))}
    return env | {"HOME": str(home), "PATH": "/usr/bin:/bin"}


@pytest.mark.slow
def test_the_memlane_command_writes_an_absolute_command_that_exists(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run(
        [MEMLANE, "--data-dir", "data", "setup", "cursor", "--project", "demo"],
        env=_env(home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    entry = json.loads((home / ".cursor/mcp.json").read_text())["mcpServers"]["memlane"]
    command = Path(entry["command"])
    assert command.is_absolute() and command.is_file() and os.access(command, os.X_OK)
    assert command == Path(MEMLANE) and entry["args"] == ["serve"]
    assert entry["env"] == {"MEMLANE_DEFAULT_PROJECT": "demo", "MEMLANE_DATA_DIR": str(tmp_path / "data")}
    listed = subprocess.run(
        [MEMLANE, "setup", "--list"], env=_env(home), capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0 and f"command: {MEMLANE} serve (exists)" in listed.stdout


@pytest.mark.slow
def test_an_unknown_client_is_a_usage_error_that_lists_the_clients(tmp_path):
    r = subprocess.run(
        [MEMLANE, "setup", "zed"], env=_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert "invalid choice: 'zed'" in r.stderr and all(c in r.stderr for c in CLIENTS)
    r = subprocess.run(
        [MEMLANE, "setup", "cursor", "--print", "--remove"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and "not allowed with argument" in r.stderr


@pytest.mark.slow
def test_setup_imports_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules)\n"
        "import memlane.server.cli.setup\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before if not m.startswith('memlane')}\n"
        "print(sorted(n for n in new if n not in sys.stdlib_module_names and not n.startswith('_')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
