"""docs/cli.md's renderer (``bench/cli_reference.py``): every command's ``--help``, nested ones and
``memlane bench``'s included, the same whatever the terminal."""

from __future__ import annotations

import argparse

from memlane.bench import cli_reference as ref


def _names(parser: argparse.ArgumentParser) -> list[str]:
    return list(ref._subparsers(parser).choices)


def test_every_command_and_subcommand_is_rendered():
    parser = ref.top_parser()
    paths = [path for path, _ in ref.commands(parser)]
    assert paths[0] == ()
    top = _names(parser)
    assert [p[0] for p in paths if len(p) == 1] == top
    for nested in ("prompts", "token", "bench"):
        below = _names(ref._lazy(nested, ref._subparsers(parser).choices[nested], "memlane"))
        assert [p[1] for p in paths if len(p) == 2 and p[0] == nested] == below
    assert {("prompts", "show"), ("token", "revoke"), ("bench", "locomo"), ("bench", "report")} <= set(paths)
    text = ref.markdown(parser)
    assert text.count("```text") == len(paths)
    for heading in ("## memlane serve", "### memlane prompts list", "### memlane bench latency"):
        assert f"\n{heading}\n" in text


def test_a_lazily_attached_subcommand_is_built_from_its_module():
    # A top-level parser whose `bench` is a stub (no subcommands), as when the command builds it lazily.
    stub = argparse.ArgumentParser(prog="memlane")
    sub = stub.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("doctor", help="check")
    sub.add_parser("bench", help="benchmarks", add_help=False)
    paths = {path: p for path, p in ref.commands(stub)}
    assert ("bench", "locomo") in paths
    assert paths[("bench", "locomo")].prog == "memlane bench locomo"
    assert ("doctor",) in paths


def test_help_is_the_same_on_every_terminal(monkeypatch):
    parser = ref.top_parser()
    monkeypatch.setenv("COLUMNS", "40")
    narrow = ref.markdown(parser)
    monkeypatch.setenv("COLUMNS", "250")
    wide = ref.markdown(parser)
    assert narrow == wide
    for line in wide.splitlines():
        assert len(line) <= ref.WIDTH, line


def test_option_strings_are_written_as_python_3_11_does():
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--output", "-o", metavar="FILE", help="where")
    original = p.formatter_class
    text = ref.help_text(p)
    assert "--output FILE, -o FILE" in text
    assert p.formatter_class is original  # the parser is left as it was


def test_memlane_help_names_the_benchmarks_as_their_own_parser_does():
    from memlane.bench import cli as bench_cli
    from memlane.server.cli import main

    assert main.BENCH_HELP == bench_cli.HELP
    bench = ref._subparsers(main._parser()).choices["bench"]
    assert ref._subparsers(bench) is None  # a stub: the benchmarks' parser is built when it runs
