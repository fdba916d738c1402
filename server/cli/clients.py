"""The MCP clients ``memlane setup`` knows: where each keeps its config file (on Linux, macOS and
Windows), under which key its servers are, and what memlane's entry looks like there.

Where the files are depends on the home directory, the platform and the environment, which a
``Host`` carries, so that the tests can be any of them. Standard library only, like ``setup``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The variables setup writes into the entry's env, from its flags; any other variable there is the
# user's and is kept.
MANAGED_ENV = ("MEMLANE_DEFAULT_PROJECT", "MEMLANE_DATA_DIR", "MEMLANE_CONFIG")


@dataclass(frozen=True)
class Client:
    name: str
    title: str
    key: str  # the top-level object that maps server names to entries
    typed: bool  # whether its entries carry "type": "stdio"
    next_step: str


CLIENTS = {
    c.name: c
    for c in (
        Client(
            "claude-desktop",
            "Claude Desktop",
            "mcpServers",
            False,
            "quit Claude Desktop completely (closing its window is not enough) and start it again",
        ),
        Client(
            "claude-code",
            "Claude Code",
            "mcpServers",
            True,
            "start a new Claude Code session (`claude mcp list` shows memlane)",
        ),
        Client("cursor", "Cursor", "mcpServers", False, "restart Cursor, or refresh its MCP settings page"),
        Client("vscode", "VS Code", "servers", True, "in VS Code, run 'MCP: List Servers' and start memlane"),
        Client(
            "windsurf",
            "Windsurf",
            "mcpServers",
            False,
            "press refresh in Windsurf's MCP servers panel, or restart Windsurf",
        ),
    )
}


@dataclass(frozen=True)
class Host:
    """The machine whose clients are set up: home directory, ``sys.platform`` value, environment."""

    home: Path
    platform: str
    environ: Mapping[str, str]

    @classmethod
    def current(cls) -> Host:
        return cls(Path.home(), sys.platform, os.environ)

    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.environ.get("PATH", os.defpath))


def config_path(client: str, host: Host) -> Path:
    """The user-level config file ``client`` reads its MCP servers from, on ``host``."""
    env, home = host.environ, host.home
    if client == "claude-code":
        return (
            Path(env["CLAUDE_CONFIG_DIR"]) / ".claude.json"
            if env.get("CLAUDE_CONFIG_DIR")
            else home / ".claude.json"
        )
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if client == "windsurf":
        return home / ".codeium" / "windsurf" / "mcp_config.json"
    app, rel = {
        "claude-desktop": ("Claude", ("claude_desktop_config.json",)),
        "vscode": ("Code", ("User", "mcp.json")),
    }[client]
    return _app_config_dir(host).joinpath(app, *rel)


def _app_config_dir(host: Host) -> Path:
    """Where desktop apps (Electron's appData) keep their settings."""
    if host.platform == "darwin":
        return host.home / "Library" / "Application Support"
    if host.platform == "win32":
        appdata = host.environ.get("APPDATA")
        return Path(appdata) if appdata else host.home / "AppData" / "Roaming"
    xdg = host.environ.get("XDG_CONFIG_HOME", "")
    return Path(xdg) if os.path.isabs(xdg) else host.home / ".config"  # the spec ignores a relative one


def entry_for(client: Client, command: str, args: list[str], env: dict[str, str], old: Any = None) -> dict:
    """The memlane entry for ``client``. Updating ``old``, its other keys (``disabled``, a timeout)
    and its other env variables (an API key) are kept, in their places; the variables of
    ``MANAGED_ENV`` are what the flags say now. An HTTP entry (``url``) is replaced whole."""
    fresh: dict[str, Any] = {"type": "stdio"} if client.typed else {}
    fresh |= {"command": command, "args": list(args)}
    if env or client.name == "claude-code":  # the claude CLI always writes "env"
        fresh["env"] = dict(env)
    if not isinstance(old, dict) or "url" in old or old.get("type", "stdio") != "stdio":
        return fresh
    merged = dict(old)
    merged.update((k, v) for k, v in fresh.items() if k != "env")
    old_env = found if isinstance(found := old.get("env"), dict) else {}
    new_env = {k: v for k, v in old_env.items() if k not in MANAGED_ENV or k in env} | env
    if new_env or "env" in old or "env" in fresh:
        merged["env"] = new_env
    else:
        merged.pop("env", None)
    return merged
