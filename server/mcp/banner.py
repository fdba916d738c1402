"""What ``memlane serve`` says first on stderr: the version, the transport, where the memories are
and how to connect a client; and, to a person who ran it at a terminal, that it waits for a client.

Standard library and the settings only: it runs before the engine and the MCP SDK are imported."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from memlane.pipeline.config import data_dir_of
from memlane.server.mcp import stdio_front
from memlane.server.version import VERSION

if TYPE_CHECKING:
    from memlane.server.settings import Settings

log = logging.getLogger("memlane.server")

CLIENTS = "claude-desktop, claude-code, cursor, vscode or windsurf"


def at_a_terminal(command: str) -> str:
    return (
        "memlane is waiting for an MCP client on stdin: `memlane serve` is started by an MCP client, "
        f"not typed into. Connect one with `{command} setup claude-desktop` (or another client), or try "
        f"the tools with `npx @modelcontextprotocol/inspector {command} serve`. Stop with Ctrl-C."
    )


def command_as_typed() -> str:
    """The memlane a person can type to reach this one: ``memlane`` when that is on PATH, else the
    path it runs from (``make run`` runs .venv/bin/memlane, which no shell finds by name), relative
    when it is under the working directory, as the person would type it there."""
    import shlex
    import shutil

    argv0 = Path(sys.argv[0])
    on_path = shutil.which("memlane")
    if argv0.name != "memlane" or (on_path and Path(on_path).resolve() == argv0.resolve()):
        return "memlane"
    where = argv0.resolve()
    try:
        relative = where.relative_to(Path.cwd().resolve())
    except ValueError:
        return shlex.quote(str(where))
    # A bare name would be looked up on PATH, where this memlane is not.
    return shlex.quote(str(relative) if len(relative.parts) > 1 else f"./{relative}")


def first_line(settings: Settings, transport: str, host: str, port: int) -> str:
    """What ``memlane serve`` says first on stderr: the version, where the memories are, the
    transport, and how to connect a client."""
    url = settings.database.url
    if url is not None:
        where = f"memories in {_database_name(url.get_secret_value())} (external PostgreSQL)"
    else:
        where = f"memories in {data_dir_of(settings.data_dir)} (embedded PostgreSQL)"
    if transport == "stdio":
        how = f"serving stdio; connect a client with `{command_as_typed()} setup claude-desktop` ({CLIENTS})"
    elif transport == "http":
        how = f"serving streamable HTTP on http://{host}:{port}/mcp; point a client at that URL"
    else:
        how = (
            f"serving SSE on http://{host}:{port}/sse (deprecated by the MCP spec: clients that can "
            "should use --transport http)"
        )
    return f"memlane {VERSION}, {how}; {where}"


def _database_name(dsn: str) -> str:
    """host:port/dbname of a DSN, never its password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - the store reports a bad DSN when it connects
        return "the configured database"
    host = parts.get("host") or "localhost"
    return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or parts.get('user') or ''}"


def _stdin_is_terminal() -> bool:
    front = stdio_front.active()
    if front is not None:
        return front.stdin_is_tty
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # no stdin, or a closed one
        return False


def announce(settings: Settings, transport: str, host: str, port: int) -> None:
    log.info("%s", first_line(settings, transport, host, port))
    if transport == "stdio" and _stdin_is_terminal():
        print(at_a_terminal(command_as_typed()), file=sys.stderr, flush=True)
