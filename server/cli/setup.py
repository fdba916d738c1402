"""``memlane setup CLIENT``: connect memlane to an MCP client (Claude Desktop, Claude Code, Cursor,
VS Code, Windsurf) by adding, updating or removing one ``memlane`` entry in its config file, and
``memlane setup --list``: where each client stands. docs/setup.md is the user's page.

Three helpers, each small enough to read alone: ``clients`` (where each client's file is and what
its entry looks like), ``entry_command`` (what the entry runs: this same memlane, or ``uvx``), and
``config_file`` (reading and writing the file so that nothing else in it changes). For
Claude Code, its own CLI does the editing when it is on PATH (``_with_claude_cli``).

Standard library only, all four: setting up a client must not start the database or import the MCP
SDK (an import-linter contract in pyproject.toml keeps it so).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from memlane.server.cli import config_file
from memlane.server.cli.clients import CLIENTS, MANAGED_ENV, Client, Host, config_path, entry_for
from memlane.server.cli.config_file import Refused
from memlane.server.cli.entry_command import NAME, Process, local_command, uv_ephemeral, uvx_spec

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
CLAUDE_TIMEOUT = 120  # seconds for one `claude mcp` call; it takes about half a second


# --- what the entry runs -------------------------------------------------------------------------


def server_command(host: Host, process: Process | None = None) -> tuple[str, list[str]]:
    """The command and arguments that start this memlane (see ``entry_command``): ``uvx --from
    SPEC memlane serve`` when ``process`` (default: this one) runs in one of uv's throwaway
    environments, else its console script's absolute path and ``serve``."""
    process = process or Process.current()
    if uv_ephemeral(process.prefix, home=host.home, platform=host.platform, environ=host.environ):
        uvx = host.which("uvx") or _uvx_beside_uv(host) or "uvx"
        spec = uvx_spec(process.direct_url, process.version, host.platform)
        return uvx, ["--from", spec, NAME, "serve"]
    return local_command(process.executable, process.argv0, host.platform)


def _uvx_beside_uv(host: Host) -> str | None:
    uv = host.environ.get("UV")  # uv sets it, to itself, in what it runs
    if not uv:
        return None
    uvx = Path(uv).with_name("uvx.exe" if host.platform == "win32" else "uvx")
    return str(uvx) if uvx.is_file() else None


# --- the command ---------------------------------------------------------------------------------


def run(args: argparse.Namespace, host: Host | None = None) -> int:
    """``memlane setup``, as parsed by the CLI's parser (its top-level ``--data-dir`` and
    ``--config`` stand in for setup's own when that is not given)."""
    host = host or Host.current()
    if args.list:
        if args.dry_run or args.project or args.setup_data_dir:
            return _usage("--list takes none of --dry-run, --project, --data-dir")
        return _list(host, [args.client] if args.client else list(CLIENTS))
    if not args.client:
        return _usage(f"choose a client: {', '.join(CLIENTS)} (or --list)")
    if args.print and args.dry_run:
        return _usage("--print changes nothing already; leave out --dry-run")
    if args.project is not None and not args.project.strip():
        return _usage("--project needs a name")
    client = CLIENTS[args.client]
    out = sys.stderr if args.print else sys.stdout  # --print: only the JSON on stdout
    try:
        env = _entry_env(args, host, out)
        command, cmd_args = server_command(host)
        if args.print:
            print(json.dumps({client.key: {NAME: entry_for(client, command, cmd_args, env)}}, indent=2))
            print(f"(paste into the {client.key!r} object of {config_path(client.name, host)})", file=out)
            return EXIT_OK
        if client.name == "claude-code" and (claude := host.which("claude")):
            return _with_claude_cli(args, client, host, claude, command, cmd_args, env)
        return _edit_file(args, client, host, command, cmd_args, env)
    except Refused as e:
        print(f"memlane setup: {e}", file=sys.stderr)
        return EXIT_ERROR


def _usage(message: str) -> int:
    print(
        f"usage: memlane setup CLIENT [options] | memlane setup --list\nmemlane setup: error: {message}",
        file=sys.stderr,
    )
    return EXIT_USAGE


def _entry_env(args: argparse.Namespace, host: Host, out) -> dict[str, str]:
    env: dict[str, str] = {}
    if args.project:
        env["MEMLANE_DEFAULT_PROJECT"] = args.project
    data_dir = args.setup_data_dir or getattr(args, "data_dir", None)
    if data_dir:
        env["MEMLANE_DATA_DIR"] = str(_absolute(data_dir, host))
    if getattr(args, "config", None):
        config = _absolute(args.config, host)
        if not config.is_file():
            raise Refused(f"--config {args.config}: no such file")
        env["MEMLANE_CONFIG"] = str(config)
    # A variable of this shell is not the client's: say so, rather than let the entry differ from it.
    for var, flag in (
        ("MEMLANE_DATA_DIR", "setup --data-dir DIR"),
        ("MEMLANE_CONFIG", "--config FILE setup"),
    ):
        if var not in env and host.environ.get(var) and not args.remove:
            print(
                f"note: {var} is set here, but the client will not see it; `memlane {flag}` puts it in the entry",
                file=out,
            )
    return env


def _absolute(path: str, host: Host) -> Path:
    p = Path(path)
    if path == "~" or path.startswith(("~/", "~\\")):
        p = host.home / path[2:]
    return p.resolve()


def _edit_file(
    args, client: Client, host: Host, command: str, cmd_args: list[str], env: dict[str, str]
) -> int:
    path = config_path(client.name, host)
    cf = config_file.load(
        path, hint=f"`memlane setup {client.name} --print` prints the entry to add by hand."
    )
    servers = _servers(cf, client)
    old, entry = servers.get(NAME), None
    if args.remove:
        if NAME not in servers:
            print(f"memlane is not configured in {client.title} ({path}): nothing to remove")
            return EXIT_OK
        action = "removed from"
    else:
        entry = entry_for(client, command, cmd_args, env, old)
        if old == entry:
            print(f"memlane is already configured in {client.title}: {path} (nothing changed)")
            _describe(entry)
            return EXIT_OK
        action = "updated in" if NAME in servers else "added to"
    new = cf.edited(client.key, NAME, entry)
    if args.dry_run:
        _show_diff(cf, new)
        print(f"dry run: memlane would be {action} {client.title}: {path}; nothing was changed")
        return EXIT_OK
    saved = config_file.backup(path) if cf.exists else None
    config_file.write_atomic(path, new)
    print(f"memlane {action} {client.title}: {path}{'' if cf.exists else ' (new file)'}")
    if saved:
        print(f"backup of the previous file: {saved}")
    if entry is not None:
        _describe(entry)
    print(f"next: {client.next_step}")
    return EXIT_OK


def _servers(cf: config_file.ConfigFile, client: Client) -> dict:
    servers = cf.data.get(client.key, {})
    if not isinstance(servers, dict):
        raise Refused(
            f"{cf.path}: {client.key!r} is a JSON {type(servers).__name__}, not an object of servers; "
            f"memlane setup has changed nothing. Fix the file, or add the entry by hand "
            f"(`memlane setup {client.name} --print`)."
        )
    return servers


def _cli_shape(entry: Any) -> dict[str, Any] | None:
    """An entry as ``claude mcp add`` writes it: these four keys, no others."""
    if not isinstance(entry, dict):
        return None
    return _cli_fields(entry)


def _cli_fields(entry: dict[str, Any]) -> dict[str, Any]:
    keys: dict[str, Any] = {"type": "stdio", "command": None, "args": [], "env": {}}
    return {k: entry.get(k) or default for k, default in keys.items()}


def _with_claude_cli(
    args, client: Client, host: Host, claude: str, command: str, cmd_args: list[str], env: dict[str, str]
) -> int:
    """Claude Code through its own CLI (user scope): ``claude mcp remove``, then ``claude mcp add``.
    Its file is read first all the same: to refuse one that is not JSON before the CLI rewrites it,
    to see whether anything would change (then nothing runs), and afterwards to check the result."""
    path = config_path(client.name, host)
    cf = config_file.load(
        path, hint=f"`memlane setup {client.name} --print` prints the entry to add by hand."
    )
    old = _servers(cf, client).get(NAME)
    remove = [claude, "mcp", "remove", "--scope", "user", NAME]
    entry = None
    if args.remove:
        if old is None:
            print(f"memlane is not configured in {client.title} ({path}, user scope): nothing to remove")
            return EXIT_OK
        steps, action = [remove], "removed from"
    else:
        # Keys of the old entry beyond these four would be lost: claude mcp add writes only these.
        entry = _cli_fields(entry_for(client, command, cmd_args, env, old))
        if _cli_shape(old) == entry:
            print(f"memlane is already configured in {client.title}: {path} (user scope; nothing changed)")
            _describe(entry)
            return EXIT_OK
        env_flags = [f for k, v in entry["env"].items() for f in ("-e", f"{k}={v}")]
        # The name before -e: -e takes every value up to the next option or "--".
        add = [
            claude,
            "mcp",
            "add",
            "--scope",
            "user",
            NAME,
            *env_flags,
            "--",
            entry["command"],
            *entry["args"],
        ]
        steps = [remove, add] if old is not None else [add]
        action = "updated in" if old is not None else "added to"
    if args.dry_run:
        print(f"dry run: memlane would be {action} {client.title} ({path}, user scope) by running:")
        for step in steps:
            print(f"  {shlex.join(step)}")
        print("nothing was changed")
        return EXIT_OK
    saved = config_file.backup(path) if cf.exists else None
    for i, step in enumerate(steps):
        r = subprocess.run(
            step, env=dict(host.environ), capture_output=True, text=True, timeout=CLAUDE_TIMEOUT
        )
        if r.returncode != 0:
            said = (r.stderr.strip() or r.stdout.strip() or "no output").splitlines()[-1]
            undone = ""
            if i > 0 and saved is not None:  # the old entry is gone: put the file back as it was
                config_file.write_atomic(path, saved.read_bytes())
                undone = f"; {path} is restored from {saved}"
            raise Refused(f"`{shlex.join(step)}` failed (exit {r.returncode}: {said}){undone}")
    after = _servers(config_file.load(path, hint=""), client).get(NAME)
    if _cli_shape(after) != entry:
        raise Refused(f"the claude CLI ran, but {path} does not hold the expected memlane entry: {after!r}")
    print(f"memlane {action} {client.title} with the claude CLI ({claude}): {path}, user scope")
    if saved:
        print(f"backup of the previous file: {saved}")
    if entry:
        _describe(entry)
    print(f"next: {client.next_step}")
    return EXIT_OK


def _describe(entry: dict) -> None:
    print(f"  command: {shlex.join([entry['command'], *entry['args']])}")
    for k, v in (entry.get("env") or {}).items():
        if k in MANAGED_ENV:
            print(f"  env: {k}={v}")


def _show_diff(cf: config_file.ConfigFile, new: bytes) -> None:
    after = new.removeprefix(config_file.BOM).decode("utf-8")
    if not cf.exists:
        print(f"would create {cf.path}:\n{after}", end="" if after.endswith("\n") else "\n")
        return
    diff = difflib.unified_diff(
        cf.text().splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=str(cf.path),
        tofile=f"{cf.path} (after memlane setup)",
    )
    sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in diff)


def _list(host: Host, names: list[str]) -> int:
    width = max(len(n) for n in names)
    for name in names:
        client, path = CLIENTS[name], config_path(name, host)
        try:
            cf = config_file.load(path, hint="")
            servers = cf.data.get(client.key, {})
            entry = servers.get(NAME) if isinstance(servers, dict) else None
        except Refused:
            print(
                f"{name:<{width}}  unreadable      {path} (not a JSON object; `memlane setup {name} --dry-run` says why)"
            )
            continue
        via = ""
        if name == "claude-code":
            claude = host.which("claude")
            via = (
                f" (user scope; edited with {claude})" if claude else " (user scope; claude CLI not on PATH)"
            )
        if not isinstance(entry, dict):
            where = path if cf.exists else f"{path} (no such file)"
            print(f"{name:<{width}}  not configured  {where}{via}")
            continue
        print(f"{name:<{width}}  configured      {path}{via}")
        print(f"{'':<{width}}  command: {_command_line(entry)} ({_command_state(entry, host)})")
    return EXIT_OK


def _command_line(entry: dict) -> str:
    if "command" not in entry:
        return f"url {entry.get('url') or entry.get('serverUrl')}"
    args = _args_of(entry)
    return shlex.join([str(entry["command"]), *map(str, args)])


def _args_of(entry: dict) -> list[Any]:
    args = entry.get("args")
    return args if isinstance(args, list) else []


def _command_state(entry: dict, host: Host) -> str:
    command = entry.get("command")
    if not isinstance(command, str):
        return "not a local command"
    found = command if os.path.isabs(command) and os.access(command, os.X_OK) else host.which(command)
    if not found:
        return "MISSING: no such command"
    args = _args_of(entry)
    if "--from" in args[:-1]:  # the uvx form: the wheel it installs from must be there too
        spec = str(args[args.index("--from") + 1])
        if os.path.isabs(spec) and not os.path.exists(spec):
            return f"exists; but MISSING: {spec}"
    return "exists"
