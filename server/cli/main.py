"""The ``memlane`` command: serve, remember, ingest, recall, supersede, history, unsupersede, forget,
update, import, export, backup, restore, doctor, maintain, reembed, prompts, token, bench, setup."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from memlane.pipeline.errors import ConfigError, MemlaneError
from memlane.server import aio, logs, shutdown
from memlane.server.mcp import banner, stdio_front

if TYPE_CHECKING:
    from memlane.pipeline.request import Request
    from memlane.server.settings import Settings

EXIT_USAGE, EXIT_ERROR = 2, 1
EXIT_BROKEN_PIPE = 128 + 13  # as a shell reports a process that SIGPIPE ended
# memlane setup's clients, as server/cli/clients.py names them (a test checks that they agree): here
# so that building the parser does not import setup, which every `memlane serve` would pay for.
# ``memlane import --from``: the readers of pipeline/importers/ (kept here so that building the
# parser imports none of them; a test checks the two agree).
IMPORT_FORMATS = (
    "memlane",
    "server-memory",
    "chatgpt",
    "claude",
    "claude-code",
    "mcp-memory-service",
    "mem0",
    "markdown",
    "auto",
)
SETUP_CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode", "windsurf")
# ``memlane bench``'s line in ``memlane --help`` (memlane.bench.cli.HELP; a test checks they agree).
BENCH_HELP = "benchmarks: LoCoMo retrieval, latency, MCP start-up, LLM stages (see README)"


def _parser(recall: type[Request] | None = None) -> argparse.ArgumentParser:
    """``recall``: the request value ``memlane recall`` offers (a test gives a variant)."""
    from memlane.pipeline.recall.query import RecallQuery
    from memlane.server.version import VERSION

    recall = recall or RecallQuery
    p = argparse.ArgumentParser(prog="memlane", description="Long-term memory for LLM agents, over MCP.")
    p.add_argument("--version", action="version", version=f"memlane {VERSION}")
    p.add_argument("--config", metavar="PATH", help="TOML settings file (default: $MEMLANE_CONFIG)")
    p.add_argument(
        "--data-dir", metavar="DIR", help="where the embedded database lives (default: $MEMLANE_DATA_DIR)"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("serve", help="run the MCP server (stdio by default)")
    s.set_defaults(run=_serve)
    s.add_argument("--transport", choices=["stdio", "http", "sse"], help="default: server.transport (stdio)")
    s.add_argument("--host", help="HTTP/SSE bind address (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="HTTP/SSE port (default 8765)")
    s.add_argument(
        "--log-format",
        choices=["text", "json"],
        help="stderr's lines: text, or one JSON object each (default: server.log_format)",
    )

    s = sub.add_parser("ui", help="serve the memory browser on 127.0.0.1 (a web page)")
    s.set_defaults(run=_ui)
    s.add_argument("--host", help="bind address; only loopback addresses (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="default: ui.port (8766)")
    s.add_argument("--log-format", choices=["text", "json"], help="default: server.log_format (text)")

    # Their options are their request values' parameters (server/cli/options.py).
    from memlane.pipeline.remember.inputs import IngestRequest, MemoryInput
    from memlane.server.cli import options

    s = sub.add_parser("remember", help="store one memory")
    s.set_defaults(run=_on_engine(lambda c: c.cmd_remember))
    options.add(s, MemoryInput)

    s = sub.add_parser(
        "ingest",
        help="store what is worth keeping from a conversation or document (split, filter, dedupe)",
        description="--source defaults to the file's name (stdin: 'ingest:' + a hash of the text).",
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_ingest))
    s.add_argument("file", help="a text file; '-' for stdin")
    options.add(s, IngestRequest)
    s.add_argument("--json", action="store_true", help="print every piece's decision as JSON")

    s = sub.add_parser("recall", help="search memories")
    s.set_defaults(run=_on_engine(lambda c: c.cmd_recall))
    options.add(s, recall)
    s.add_argument("--json", action="store_true", help="print JSON")

    s = sub.add_parser(
        "supersede", help="mark memory OLD superseded by NEW (a newer value of the same fact); prints OLD"
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_supersede))
    s.add_argument("old", metavar="OLD", help="id or handle of the memory that is no longer current")
    s.add_argument("new", metavar="NEW", help="id or handle of the memory that replaces it")
    s.add_argument("--json", action="store_true", help="print OLD, as marked, as JSON")
    s = sub.add_parser(
        "history", help="a memory's past: the contents its updates replaced and the memories it superseded"
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_history))
    s.add_argument("id", metavar="ID", help="id or handle of the memory")
    s.add_argument("--json", action="store_true", help="print JSON (the memory, versions, supersessions)")
    s = sub.add_parser("unsupersede", help="make a superseded memory current again; prints it")
    s.set_defaults(run=_on_engine(lambda c: c.cmd_unsupersede))
    s.add_argument("id", metavar="ID", help="id or handle of the superseded memory")
    s.add_argument("--json", action="store_true", help="print the memory, current again, as JSON")

    from memlane.pipeline.remember.inputs import MemoryPatch, MemoryRef

    s = sub.add_parser(
        "forget",
        help="delete one memory for good (shows it and asks; --yes without asking)",
        description="Exit status: 0 deleted; 1 an error or the answer was no; 2 refused: no "
        "terminal to ask at and no --yes.",
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_forget))
    options.add(s, MemoryRef)
    s.add_argument("--yes", "-y", action="store_true", help="delete without asking (scripts)")
    s.add_argument("--project", help="refuse unless the memory is in this project (a check on the id)")
    s.add_argument("--json", action="store_true", help="print the forget tool's JSON result")
    s = sub.add_parser(
        "update",
        help="change fields of a memory; new content is re-embedded, the old kept as a version",
        description="Only the fields given change; at least one is needed.",
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_update))
    options.add(s, MemoryRef)
    options.add(s, MemoryPatch)
    s.add_argument("--project", help="refuse unless the memory is in this project (a check on the id)")
    s.add_argument("--json", action="store_true", help="print the update tool's JSON result")

    s = sub.add_parser(
        "import",
        help="import memories from memlane's JSONL or another tool's export (docs/switching.md); "
        "nothing is added twice",
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_import))
    s.add_argument(
        "file",
        metavar="PATH",
        help="the export: a file or a folder (memlane's JSONL: '-' reads stdin)",
    )
    s.add_argument(
        "--from",
        dest="source_format",
        default="auto",
        choices=IMPORT_FORMATS,
        metavar="FORMAT",
        help=f"one of {', '.join(IMPORT_FORMATS)} (default auto: detected from the path and its content, "
        "and said)",
    )
    s.add_argument(
        "--project",
        type=options.project_option,
        help="the project to import into (memlane JSONL: for lines without one)",
    )
    s.add_argument("--dry-run", action="store_true", help="read and check everything, store nothing")
    s.add_argument("--json", action="store_true", help="print the counts as JSON")
    s.add_argument("--batch-size", type=int, default=256, help="memlane JSONL: memories per transaction")

    s = sub.add_parser("export", help="write every memory as JSONL (round-trips through import)")
    s.set_defaults(run=_on_engine(lambda c: c.cmd_export))
    s.add_argument(
        "--project", type=options.project_option, help="only this project's memories (default: all)"
    )
    s.add_argument("--output", "-o", help="file (default: stdout)")

    s = sub.add_parser(
        "backup", help="snapshot the whole store with pg_dump, safe while servers run (docs/backup.md)"
    )
    s.set_defaults(run=_backup)
    s.add_argument(
        "file",
        nargs="?",
        metavar="FILE",
        help="the archive to write (default: DATA_DIR/backups/memlane-<YYYYmmdd-HHMMSS>-schema<N>.dump); "
        "its manifest goes next to it as FILE.json",
    )
    s = sub.add_parser(
        "restore", help="load a backup into an empty data directory or database, and verify it"
    )
    s.set_defaults(run=_restore)
    s.add_argument(
        "file", metavar="FILE", help="a .dump written by memlane backup (its FILE.json next to it)"
    )
    s.add_argument(
        "--force", action="store_true", help="replace the memlane store (and tokens file) already there"
    )

    s = sub.add_parser("doctor", help="check configuration, database, model and versions")
    s.set_defaults(run=_on_engine(lambda c: c.cmd_doctor))
    s.add_argument("--json", action="store_true", help="print the report as JSON")

    s = sub.add_parser("prompts", help="the versioned prompt templates of the LLM stages")
    s.set_defaults(run=_prompts)
    psub = s.add_subparsers(dest="prompts_command", required=True, metavar="ACTION")
    psub.add_parser("list", help="every prompt and version, with its id (name@vN#sha8) and purpose")
    show = psub.add_parser("show", help="one prompt's file: NAME (newest version) or NAME@vN")
    show.add_argument(
        "name", metavar="NAME[@VERSION]", help="a prompt's name, as list shows it; @vN for a version"
    )
    s = sub.add_parser(
        "maintain", help="upkeep: run the maintenance tasks (idempotent, resumable, safe while servers run)"
    )
    s.set_defaults(run=_on_engine(lambda c: c.cmd_maintain))
    s.add_argument(
        "--task", action="append", dest="tasks", metavar="NAME", help="run only this task (repeatable)"
    )
    s.add_argument("--dry-run", action="store_true", help="say what would be done, change nothing")
    s.add_argument("--list", action="store_true", help="list the tasks and exit")

    s = sub.add_parser("token", help="bearer tokens for the HTTP transports (only their hashes are stored)")
    s.set_defaults(run=_token)
    tsub = s.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    t = tsub.add_parser("create", help="make a token; prints it once, alone on the last line of stdout")
    t.add_argument(
        "--projects",
        action="append",
        required=True,
        help="project names or glob patterns it may read and write ('acme*', '*' for all); "
        "comma-separated or repeated",
    )
    t.add_argument("--name", help="its principal's name (default: token-<hash prefix>)")
    tsub.add_parser("list", help="name, projects, created and hash prefix of every token (never the token)")
    t = tsub.add_parser("revoke", help="delete a token: its name or a prefix of its hash (6+ hex digits)")
    t.add_argument("which", metavar="NAME-or-PREFIX", help="the token's name, or 6+ hex digits of its hash")
    s = sub.add_parser("reembed", help="re-embed every memory with the configured model (resumable)")
    s.set_defaults(run=_on_engine(lambda c: c.cmd_reembed))
    s.add_argument("--batch-size", type=int, default=256, help="memories embedded and written at a time")

    s = sub.add_parser(
        "setup",
        help="connect memlane to an MCP client: add its entry to the client's config (docs/setup.md)",
        description="Add, update or remove the memlane entry in an MCP client's config file, leaving the "
        "rest of the file as it was; the old file is kept next to it as a timestamped backup.",
    )
    s.set_defaults(run=_setup)
    s.add_argument(
        "client", nargs="?", choices=SETUP_CLIENTS, metavar="CLIENT", help=", ".join(SETUP_CLIENTS)
    )
    s.add_argument("--project", help="memlane's default project for this client (MEMLANE_DEFAULT_PROJECT)")
    s.add_argument(
        "--data-dir",
        dest="setup_data_dir",  # not data_dir: the subparser's default would overwrite the top-level one
        metavar="DIR",
        help="where this client's memlane keeps its database (MEMLANE_DATA_DIR, made absolute; "
        "default: the top-level --data-dir if given, else memlane's default)",
    )
    s.add_argument("--dry-run", action="store_true", help="show what would change (a diff); change nothing")
    one = s.add_mutually_exclusive_group()
    one.add_argument("--print", action="store_true", help="print the entry as JSON, to paste by hand")
    one.add_argument("--remove", action="store_true", help="remove the memlane entry, leave the rest")
    one.add_argument("--list", action="store_true", help="every client: configured or not, its file, command")

    # Only its name here: the benchmarks' own parser (memlane.bench.cli) reads the rest of the
    # command line, when this command runs (``main``).
    s = sub.add_parser("bench", help=BENCH_HELP, add_help=False)
    s.set_defaults(run=_bench)
    return p


def _unrecognized(parser: argparse.ArgumentParser, args: argparse.Namespace, rest: list[str]) -> None:
    """Exits with the usage of the (sub)command the arguments were for, not the top level's, and
    the nearest option for each misspelled one (``--projct``: did you mean --project?). By hand:
    argparse's own ``suggest_on_error`` is newer than the Pythons memlane runs on."""
    command = parser
    while True:  # down to the innermost subcommand given (``memlane token create``)
        action = next((a for a in command._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, action.dest, None) if action is not None else None
        if action is None or chosen not in action.choices:
            break
        command = action.choices[chosen]
    known = [o for a in command._actions for o in a.option_strings if o.startswith("--")]
    near = {}
    for arg in rest:
        flag = arg.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1) if flag.startswith("-") else []
        if close:
            near[flag] = close[0]
    message = f"unrecognized arguments: {' '.join(rest)}"
    if len(near) == 1:
        message += f"; did you mean {next(iter(near.values()))}?"
    elif near:
        message += "; did you mean " + ", ".join(f"{o} (for {f})" for f, o in near.items()) + "?"
    command.error(message)


def _settings(args) -> Settings:
    overrides: dict[str, Any] = {}
    if args.data_dir:
        overrides["data_dir"] = Path(args.data_dir)
    from memlane.server.settings import load  # here: pydantic-settings, ~0.3 s to import

    return load(args.config, **overrides)


def _engine_starting(settings: Settings):
    """The server's engine, its database starting and its model loading (threads) while the MCP
    SDK is imported: they are then ready about when the server is."""
    from memlane.pipeline.engine import Engine

    engine = Engine(settings.engine())
    engine.runtime.prestart()
    engine.runtime.warm_in_background()
    return engine


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` runs, before the parser is built (the global options come first)."""
    args = list(argv)
    while args and args[0] in ("--config", "--data-dir"):
        args = args[2:]
    while args and args[0].startswith(("--config=", "--data-dir=")):
        args = args[1:]
    return args[0] if args else None


def main(argv: list[str] | None = None) -> int:
    """``memlane``'s entry. A reader that stops early (``memlane setup --list | head -1``) ends
    the command quietly: Python's own SIGPIPE handling is off, so the write raises instead; as the
    CPython docs' note on SIGPIPE advises, stdout is pointed at devnull (so the interpreter's last
    flush cannot raise again) and the exit code is the shell's for a process that SIGPIPE ended."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    own = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    # First: a stop from here on leaves nothing running behind (the servers take SIGINT too).
    shutdown.exit_cleanly_on_signals(sigint=_command(argv) in ("serve", "ui"))
    # Before anything heavy is imported: over stdio, initialize and tools/list are answered while
    # the rest loads (server/mcp/stdio_front.py). Only for the process's own command line.
    if own:
        stdio_front.start(argv)
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "bench":
        from memlane.bench import cli as bench_cli  # the one entry from the product to the benchmarks

        bench_cli.parse(rest, into=args)
    elif rest:
        _unrecognized(parser, args, rest)
    if args.command == "setup":
        # Before the settings: setup reads none (a broken config must not stop it) and takes the
        # top-level --data-dir and --config as values for the client's entry.
        return _setup(args)
    try:
        settings = _settings(args)
    except ConfigError as e:
        print(f"memlane: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.command in ("serve", "ui"):
        logs.setup(settings.server.log_level, getattr(args, "log_format", None) or settings.server.log_format)
    else:
        logs.setup("WARNING")
    try:
        run: Callable[[argparse.Namespace, Settings], int] = args.run
        return run(args, settings)
    except MemlaneError as e:
        print(f"memlane: {e}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("memlane: interrupted", file=sys.stderr)
        return 130


# -- what each command runs ------------------------------------------------------------------------
# Each imports what it needs when it runs: the MCP SDK, the web stack and the engine each take
# seconds to import, and most commands need only one of them.


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    # Over stdio (the front has the wire), a client is waiting: start early. HTTP first checks
    # that it may serve at all.
    banner.announce(
        settings,
        args.transport or settings.server.transport,
        args.host or settings.server.host,
        args.port or settings.server.port,
    )
    engine = _engine_starting(settings) if stdio_front.active() else None
    from memlane.server.mcp.serve import serve  # here: the MCP SDK, about a second to import

    return serve(settings, transport=args.transport, host=args.host, port=args.port, engine=engine)


def _ui(args: argparse.Namespace, settings: Settings) -> int:
    from memlane.server.ui.run import run

    return run(settings, host=args.host, port=args.port)


def _setup(args: argparse.Namespace, settings: Settings | None = None) -> int:
    from memlane.server.cli import setup

    return setup.run(args)


def _prompts(args: argparse.Namespace, settings: Settings) -> int:
    from memlane.server.cli.commands import cmd_prompts

    return cmd_prompts(args)


def _token(args: argparse.Namespace, settings: Settings) -> int:
    from memlane.server.cli.commands import cmd_token

    return cmd_token(args, settings)


def _backup(args: argparse.Namespace, settings: Settings) -> int:
    from memlane.server.cli.backup import cmd_backup

    return cmd_backup(args, settings)


def _restore(args: argparse.Namespace, settings: Settings) -> int:
    from memlane.server.cli.backup import cmd_restore

    return cmd_restore(args, settings)


def _bench(args: argparse.Namespace, settings: Settings) -> int:
    from memlane.bench import cli as bench_cli

    return bench_cli.run(args, settings)


def _on_engine(
    handler: Callable[[ModuleType], Callable[..., Awaitable[int]]],
) -> Callable[[argparse.Namespace, Settings], int]:
    """A command that drives the engine: ``handler`` picks its function from
    ``server/cli/commands.py``, which is imported only when the command runs."""

    def run(args: argparse.Namespace, settings: Settings) -> int:
        from memlane.server.cli import commands

        return aio.run(commands.with_engine(settings, handler(commands), args))

    return run


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
