"""What ``memlane`` reads, as a person types it: ``-`` for stdin, a reader that closes the pipe
early, a misspelled flag, help on every option, an empty query or project, an expiry already past."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
from pathlib import Path

import pytest
from support.clients import call_ok
from support.processes import CLI_TIMEOUT, MEMLANE, server_env

from memlane.pipeline.validate import FACT_TYPES
from memlane.server.cli.main import EXIT_BROKEN_PIPE, _parser, main


def stored(cli, project: str) -> list[str]:
    code, out, err = cli("export", "--project", project)
    assert code == 0, err
    return [json.loads(line)["content"] for line in out.splitlines()]


def test_remember_dash_reads_the_content_from_stdin(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("The staging database is called heron\n"))
    code, out, err = cli("remember", "-", "--project", "stdin")
    assert code == 0, err
    assert stored(cli, "stdin") == ["The staging database is called heron"]
    monkeypatch.setattr("sys.stdin", io.StringIO("which database is staging?"))
    code, out, err = cli("recall", "-", "--project", "stdin", "--json")
    assert code == 0, err
    assert [m["content"] for m in json.loads(out)["memories"]] == ["The staging database is called heron"]
    # As a person reads it: stdin is read once, though the answer checks the projects too.
    monkeypatch.setattr("sys.stdin", io.StringIO("which database is staging?\n"))
    code, out, err = cli("recall", "-", "--project", "stdin")
    assert code == 0, err
    assert out.startswith(" 1. The staging database is called heron")
    monkeypatch.setattr("sys.stdin", io.StringIO("the weather on Mars\n"))
    code, out, err = cli("recall", "-", "--project", "stdin", "--category", "nope")
    assert code == 0, err
    assert out.startswith("No memory in project 'stdin' matches 'the weather on Mars' with these filters.")


@pytest.mark.parametrize("command", ["remember", "recall"])
def test_dash_with_empty_stdin_is_a_clear_error_and_stores_nothing(cli, monkeypatch, command):
    monkeypatch.setattr("sys.stdin", io.StringIO(" \n"))
    code, out, err = cli(command, "-", "--project", "stdin")
    assert code == 1 and out == ""
    what = "content" if command == "remember" else "query"
    assert f"'-' reads the {what} from stdin, and stdin was empty" in err
    assert f"| memlane {command} -" in err
    assert stored(cli, "stdin") == []


def test_ingest_dash_reads_stdin_and_refuses_an_empty_one(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code, _, err = cli("ingest", "-", "--project", "ing", "--kind", "document")
    assert code == 1 and "text is empty" in err
    monkeypatch.setattr(
        "sys.stdin", io.StringIO("The nightly backup runs at 02:00 and keeps 30 days of dumps.")
    )
    code, out, err = cli("ingest", "-", "--project", "ing", "--kind", "document")
    assert code == 0, err
    assert stored(cli, "ing") == ["The nightly backup runs at 02:00 and keeps 30 days of dumps."]


def _closed_early(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``memlane argv | reader`` where the reader has gone before memlane writes a byte (as
    ``head -1`` has after its line): every write to stdout meets a closed pipe."""
    proc = subprocess.Popen([MEMLANE, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=CLI_TIMEOUT)
    return subprocess.CompletedProcess(argv, proc.returncode, b"", err)


@pytest.mark.slow
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(cli, database_url, tmp_path):
    assert cli("remember", "The release train leaves on Thursdays", "--project", "pipe")[0] == 0
    env = server_env(tmp_path / "data", HOME=str(tmp_path), MEMLANE_DATABASE__URL=database_url)
    for argv in (["setup", "--list"], ["recall", "when does the release train leave?", "--project", "pipe"]):
        done = _closed_early(argv, env)
        err = done.stderr.decode()
        assert "Traceback" not in err and "BrokenPipeError" not in err, err
        assert done.returncode == EXIT_BROKEN_PIPE, err
    # And a reader that stays: the same command prints, and exits 0.
    whole = subprocess.run([MEMLANE, "setup", "--list"], env=env, capture_output=True, timeout=CLI_TIMEOUT)
    assert whole.returncode == 0 and b"claude-desktop" in whole.stdout


@pytest.mark.parametrize(
    ("argv", "usage", "hint"),
    [
        (["recall", "x", "--projct", "p"], "usage: memlane recall ", "did you mean --project?"),
        (
            ["remember", "x", "--expire-at=2099-01-01"],
            "usage: memlane remember ",
            "did you mean --expires-at?",
        ),
        (
            ["token", "create", "--projects", "a", "--nmae", "n"],
            "usage: memlane token create ",
            "did you mean --name?",
        ),
    ],
)
def test_a_misspelled_flag_shows_the_subcommands_usage_and_the_nearest_flag(capsys, argv, usage, hint):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.startswith(usage), err
    assert "unrecognized arguments" in err and err.rstrip().endswith(hint), err


def test_an_unknown_flag_with_nothing_near_it_is_named_without_a_guess(capsys):
    with pytest.raises(SystemExit):
        main(["recall", "x", "--zzzzzz"])
    err = capsys.readouterr().err
    assert err.startswith("usage: memlane recall ") and err.rstrip().endswith(
        "unrecognized arguments: --zzzzzz"
    )


def _subcommands(parser: argparse.ArgumentParser, path: str = "memlane"):
    """Every (sub)command's parser, with its name: ``memlane token create``."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, f"{path} {name}")


def test_every_option_of_every_command_has_help():
    seen, missing = 0, []
    for path, parser in _subcommands(_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            seen += 1
            if not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert seen > 60  # the walk reached the subcommands' options
    assert missing == []


def test_fact_type_help_names_every_fact_type_in_a_persons_words():
    for path, parser in _subcommands(_parser()):
        for action in parser._actions:
            if "--fact-type" in action.option_strings:
                assert all(t in action.help for t in FACT_TYPES), (path, action.help)
                assert "the user" not in action.help, (path, action.help)  # the tool's words are a model's


def test_an_empty_query_asks_for_what_to_find(cli):
    code, out, err = cli("recall", "   ")
    assert code == 1 and out == ""
    assert "query is empty: ask in words what you want to find" in err and "remember" not in err


def test_an_expiry_in_the_past_is_refused_and_nothing_is_stored(cli):
    code, out, err = cli(
        "remember", "The door code is 4411", "--project", "exp", "--expires-at", "1999-01-01"
    )
    assert code == 1 and out == ""
    assert "expires_at 1999-01-01T00:00:00+00:00 is in the past" in err
    assert stored(cli, "exp") == []
    assert cli("remember", "The door code is 4411", "--project", "exp", "--expires-at", "2999-01-01")[0] == 0
    assert stored(cli, "exp") == ["The door code is 4411"]


def test_import_restores_a_memory_that_has_expired_since_its_export(cli, tmp_path: Path):
    export = tmp_path / "old.jsonl"
    line = {
        "content": "The visitor badge code was 1234",
        "project": "old",
        "expires_at": "2001-01-01T00:00:00Z",
    }
    export.write_text(json.dumps(line) + "\n", encoding="utf-8")
    code, out, err = cli("import", str(export), "--json")
    assert code == 0, err
    assert json.loads(out)["stored"] == 1
    assert stored(cli, "old") == ["The visitor badge code was 1234"]


@pytest.mark.parametrize(
    "argv",
    [
        ["remember", "x", "--project", ""],
        ["recall", "x", "--project", " "],
        ["recall", "x", "--current-project", ""],
        ["import", "f.jsonl", "--project", ""],
        ["export", "--project", ""],
    ],
)
def test_an_empty_project_name_is_refused(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert f"usage: memlane {argv[0]} " in err and "empty project name" in err


@pytest.mark.anyio
async def test_the_tools_read_an_empty_project_as_omitted(connect):
    """The tools read an empty project as they read every empty optional value: omitted, the
    default project (a model's client may fill every parameter). The CLI refuses it instead."""
    async with connect() as client:
        res = await call_ok(client, "remember", {"content": "The office opens at eight", "project": ""})
        assert res["project"] == "default"


def test_help_names_options_as_a_person_types_them():
    """The declarations speak the tools' names (``max_tokens``); ``--help`` says the options."""
    helps = {path: " ".join(parser.format_help().split()) for path, parser in _subcommands(_parser())}
    assert "a share of --max-tokens" in helps["memlane recall"]
    assert "--current-project's memories" in helps["memlane recall"]
    for path in ("memlane recall", "memlane remember", "memlane ingest"):
        assert "max_tokens" not in helps[path] and "current_project" not in helps[path], path
