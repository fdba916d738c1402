"""A command's options made from a request value's parameters (``Request.parameters("cli")``): the
option's spelling, its type, its choices and its help are the declaration's, and the value lands
under the parameter's name (``--tag`` repeated: ``args.tags``), which ``given`` hands back as the
request's fields. ``memlane remember``, ``ingest`` and ``recall`` take their options from here.
The help is the declaration's ``help`` (its words for a person) or else its description; a
memory's content or a query given as ``-`` is read from stdin; an empty project name is refused."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.request import Request


def add(parser: argparse.ArgumentParser, request: type[Request]) -> None:
    """One argument per parameter ``request`` offers the command line, in its order: a required
    one positional, a flag for a boolean, a repeatable option for a list."""
    params = request.parameters("cli")
    # A help that names another parameter by the tool's name ("a share of max_tokens") names the
    # option a person types instead (--max-tokens).
    flags = {q.name: q.flag for q in params if "_" in q.name and not q.required}
    named = re.compile(r"\b(" + "|".join(map(re.escape, flags)) + r")\b") if flags else None
    for p in params:
        text = named.sub(lambda m: flags[m.group(1)], p.help) if named else p.help
        text = text.replace("%", "%%")  # argparse formats help with %
        if p.name in FROM_STDIN:
            text += " '-' reads it from stdin."
        if p.required:
            parser.add_argument(p.name, help=text)
            continue
        if p.many:  # one name or several (--project): ``given`` splits them at commas too
            text += " Repeatable or comma-separated." if p.takes(str) else " Repeatable."
        kwargs: dict[str, Any] = {"dest": p.name, "help": text}
        if p.wire is bool:
            kwargs["action"] = "store_true"
        elif p.takes(bool):
            kwargs["action"] = argparse.BooleanOptionalAction
        else:
            kwargs["action"] = "append" if p.many else "store"
            if p.choices:
                kwargs["choices"] = p.choices
            if p.takes(int):
                kwargs["type"] = int
            elif p.name in PROJECT_PARAMETERS:
                kwargs["type"] = project_option
            if isinstance(p.default, str):
                kwargs["default"] = p.default
            if p.takes(dict):
                kwargs["metavar"] = "JSON"
            elif p.is_date:
                kwargs["metavar"] = "ISO8601"
            elif not p.choices:
                kwargs["metavar"] = p.flag.lstrip("-").replace("-", "_").upper()
        parser.add_argument(p.flag, **kwargs)


def given(args: argparse.Namespace, request: type[Request]) -> dict[str, Any]:
    """The request's fields the command line gave (every offered one; an option left out is
    ``None``, which the request reads as its default). A text given as ``-`` is read from stdin
    (``echo "..." | memlane remember -``)."""
    out: dict[str, Any] = {}
    for p in request.parameters("cli"):
        if hasattr(args, p.name):
            value = getattr(args, p.name)
            if p.name in FROM_STDIN and value == "-":
                command = f"memlane {getattr(args, 'command', None) or '...'}"
                value = _stdin(p.name, f"{command} -" if p.required else f"{command} ... {p.flag} -")
            out[p.name] = _one_or_several(value) if p.many and p.takes(str) else value
    return out


# The texts a person may pipe in, given as ``-`` (a memory's content, recall's query): not an id
# or a name, where ``-`` would read a value no one types at length.
FROM_STDIN = ("content", "query")
# The options that name a project: an empty name is refused rather than read as "omitted".
PROJECT_PARAMETERS = ("project", "current_project")


def project_option(value: str) -> str:
    """A project name given on the command line. The tools read an empty project as omitted (the
    default project), as they read every empty optional value; but a person who types
    ``--project ""`` (or ``--project "$UNSET"``) meant some project, and would find the memory
    filed under another: refused, with the way to the default."""
    if not value.strip():
        raise argparse.ArgumentTypeError(
            "empty project name: give a name, or leave the option out for the default project"
        )
    return value


def _stdin(name: str, example: str) -> str:
    text = sys.stdin.read()
    if not text.strip():
        raise InvalidInput(
            f"'-' reads the {name} from stdin, and stdin was empty: pipe it in, e.g. echo '...' | {example}"
        )
    return text


def _one_or_several(values: list[str] | None) -> str | list[str] | None:
    """An option repeated or comma-separated, where one value or a list is taken: one name, or a
    list (a recall across projects)."""
    names = [n.strip() for v in values or () for n in v.split(",") if n.strip()]
    if not names:
        return None
    return names[0] if len(names) == 1 else names
