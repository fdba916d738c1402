"""docs/cli.md's body: ``memlane --help`` and every subcommand's ``--help``, nested ones included.

The cog block in docs/cli.md calls ``markdown()``; ``make docs`` (``cog --check``) then fails when
a help text changed and the page was not regenerated (``make docs-generate``). Here, not in
``memlane.server``, because ``memlane bench``'s parser comes from ``memlane.bench.cli``, which the
product may not import (an import-linter contract).

The help is rendered the same on every terminal: a fixed width, no colour, and option strings
written as Python 3.11 writes them (3.13 writes ``-o, --output OUTPUT`` for ``-o OUTPUT, --output
OUTPUT``), so the page does not change with the machine that regenerates it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator

__all__ = ["WIDTH", "commands", "markdown", "top_parser"]

WIDTH = 100


def top_parser() -> argparse.ArgumentParser:
    """The seam: ``memlane``'s parser, as the command builds it. Everything below walks its
    subparsers, so a command added there appears in the page without a change here."""
    from memlane.server.cli.main import _parser

    return _parser()


def _bench(sub: argparse._SubParsersAction) -> None:
    from memlane.bench.cli import add_parser

    add_parser(sub)


# Subcommands whose full parser the command may attach only when it runs (a stub in the top-level
# parser): how to build them here instead.
LAZY: dict[str, Callable[[argparse._SubParsersAction], None]] = {"bench": _bench}


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    """The parser's subcommands (argparse keeps them, privately, as its one subparsers action)."""
    if parser._subparsers is None:
        return None
    for action in parser._subparsers._group_actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _lazy(name: str, parser: argparse.ArgumentParser, parent_prog: str) -> argparse.ArgumentParser:
    """``parser``, or, when it is a stub without its subcommands, the one ``LAZY`` builds."""
    build = LAZY.get(name)
    if build is None or _subparsers(parser) is not None:
        return parser
    holder = argparse.ArgumentParser(prog=parent_prog)
    sub = holder.add_subparsers()
    build(sub)
    return sub.choices[name]


def commands(
    parser: argparse.ArgumentParser | None = None,
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command, depth first in the order the parser lists them: ``(path, parser)``, the path
    being ``()`` for ``memlane`` itself, ``("prompts", "show")`` for ``memlane prompts show``."""

    def walk(path: tuple[str, ...], p: argparse.ArgumentParser):
        yield path, p
        sub = _subparsers(p)
        if sub is None:
            return
        seen: set[int] = set()
        for name, child in sub.choices.items():
            if id(child) in seen:  # an alias
                continue
            seen.add(id(child))
            yield from walk((*path, name), _lazy(name, child, p.prog))

    yield from walk((), parser if parser is not None else top_parser())


class _Py311Options(argparse.HelpFormatter):
    """Python 3.11's option strings (``-o OUTPUT, --output OUTPUT``), mixed into a formatter."""

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if not action.option_strings or action.nargs == 0:
            return super()._format_action_invocation(action)
        args = self._format_args(action, self._get_default_metavar_for_optional(action))
        return ", ".join(f"{option} {args}" for option in action.option_strings)


def help_text(parser: argparse.ArgumentParser) -> str:
    """``parser``'s ``--help``, WIDTH columns wide, without colour, whatever the terminal."""
    original = parser.formatter_class
    assert isinstance(original, type)  # argparse's formatters are classes; ours too
    fixed = type("Formatter", (_Py311Options, original), {})
    parser.formatter_class = lambda prog: fixed(prog, width=WIDTH)
    if sys.version_info >= (3, 14):  # colour when the output is a terminal
        color = parser.color
        parser.color = False
    try:
        return parser.format_help()
    finally:
        parser.formatter_class = original
        if sys.version_info >= (3, 14):
            parser.color = color


def markdown(parser: argparse.ArgumentParser | None = None) -> str:
    """A heading and a ``text`` block per command: ``##`` for ``memlane`` and its commands, one
    level deeper for each level of subcommands below them."""
    out = []
    for path, p in commands(parser):
        level = 2 + max(len(path) - 1, 0)
        out += [f"{'#' * level} {p.prog}", "", "```text", help_text(p).rstrip(), "```", ""]
    return "\n".join(out)
