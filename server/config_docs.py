"""The configuration's generated documentation, rendered from the settings models.

``reference_markdown`` writes the reference tables of docs/configuration.md and ``example_toml``
the body of config.example.toml (the cog block in each calls it); ``make docs`` (``cog --check``)
fails when a setting changed and either file was not regenerated (``make docs-generate``). So a
setting's description, default and example are written once, in its model. Nothing here is on the
server's path: only the docs import it.
"""

from __future__ import annotations

import json
import re
import textwrap
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from memlane.pipeline.config import secret_fields
from memlane.server.settings import ENV_PREFIX, Settings

__all__ = ["example_toml", "reference_markdown"]


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " \\| ".join(f'"{a}"' if isinstance(a, str) else str(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _default_text(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if value is None:
        return "-"
    if isinstance(value, Path):
        value = str(value)
    # Pipes not escaped: in a code span MkDocs keeps them, and would show the backslash.
    return f"`{json.dumps(value, ensure_ascii=False, default=str)}`"


def _field_default(field: Any) -> Any:
    if field.default is PydanticUndefined and field.default_factory is None:
        return PydanticUndefined
    return field.get_default(call_default_factory=True)


def _section(model: Any) -> type[BaseModel] | None:
    """The nested settings model a field holds (``recall.decay``), or None for a value."""
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _fields(
    section: type[BaseModel], defaults: BaseModel | None
) -> Iterator[tuple[str, Any, Any, type[BaseModel] | None]]:
    """Each field of ``section``: its name, its ``FieldInfo``, its default and the nested section it
    holds (or None). A nested section's defaults are those of the instance its parent holds
    (llm.stages.extract is off there, though LLMStageConfig's own default is on), so with
    ``defaults`` (that instance) the values come from it."""
    for name, field in section.model_fields.items():
        value = _field_default(field) if defaults is None else getattr(defaults, name)
        yield name, field, value, _section(field.annotation)


def _variable(path: tuple[str, ...], name: str) -> str:
    """The environment variable of the setting ``name`` in section ``path``."""
    return ENV_PREFIX + "__".join((*path, name)).upper()


def reference_markdown(model: type[BaseModel] | None = None) -> str:
    """Every setting as Markdown tables, one per section: key, type, default, variable, meaning.

    Written for ``docs/configuration.md`` (``make docs`` checks that the page matches), so the
    descriptions in the models are the one place each setting is explained."""
    model = model or Settings
    lines: list[str] = []

    def table(
        section: type[BaseModel], path: tuple[str, ...], defaults: BaseModel | None, note: str = ""
    ) -> None:
        rows, nested = [], []
        for name, field, value, sub in _fields(section, defaults):
            if sub is not None:
                nested.append((name, sub, value))
                continue
            key = ".".join((*path, name))
            env = _variable(path, name)
            desc = " ".join((field.description or "").split()).replace("|", "\\|")
            default = "(required)" if value is PydanticUndefined else _default_text(value)
            rows.append(f"| `{key}` | {_type_name(field.annotation)} | {default} | `{env}` | {desc} |")
        if rows:
            title = f"`[{'.'.join(path)}]`" if path else "Top level"
            doc = " ".join((section.__doc__ or "").split()) if path else ""
            lines.extend([f"### {title}", ""] + [p + "\n" for p in (doc, note) if p])
            lines.extend(["| key | type | default | environment | meaning |", "|---|---|---|---|---|"])
            lines.extend(rows + [""])
        # Three or more sibling sections of one model ([llm.stages.*]) share one table, written
        # for <name>, with each one's non-default values listed, rather than one table apiece.
        kinds: dict[type, list[tuple[str, BaseModel]]] = {}
        for name, sub, value in nested:
            kinds.setdefault(sub, []).append((name, value))
        for sub, members in kinds.items():
            if len(members) < 3:
                for name, value in members:
                    table(sub, (*path, name), value)
                continue
            names = ", ".join(f"`{n}`" for n, _ in members)
            plain = sub()
            changed = [
                f"`{n}`: " + ", ".join(f"`{k} = {_default_text(v).strip('`')}`" for k, v in diff.items())
                for n, value in members
                if (
                    diff := {
                        k: getattr(value, k)
                        for k in sub.model_fields
                        if getattr(value, k) != getattr(plain, k)
                    }
                )
            ]
            note = f"`<name>` is one of {names}." + (
                f" Defaults that differ: {'; '.join(changed)}." if changed else ""
            )
            table(sub, (*path, "<name>"), plain, note)

    table(model, (), None)
    return "\n".join(lines)


# -- config.example.toml -------------------------------------------------------------------------

WIDTH = 100

# What the file says before the first setting. The secrets are listed from the models (by type, as
# the loader finds them), so the sentence stays true when one is added.
HEADER = """\
Generated from the settings models (pipeline/config/, server/settings.py) by `make docs-generate`;
`make docs` fails when this file no longer matches them, so edit a description there, not here.

Use it with `memlane --config PATH ...` or MEMLANE_CONFIG=PATH. Precedence, lowest first: defaults
< this file < environment variables MEMLANE_* (nested with __, e.g. MEMLANE_RECALL__DEFAULT_LIMIT=5)
< command-line flags. Unknown keys are errors that name the key. Every value below is the default;
a line commented out is unset by default, and shows an example. Secrets ({secrets}) are refused
here: set them in the environment, under the variable named where each is described."""

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _comment(text: str) -> list[str]:
    """Prose as ``#`` lines within WIDTH; paragraphs (blank lines in ``text``) kept apart."""
    lines: list[str] = []
    for para in text.split("\n\n"):
        words = " ".join(para.split()).replace("``", "`")
        if lines:
            lines.append("#")
        lines.extend(
            textwrap.wrap(
                words,
                WIDTH,
                initial_indent="# ",
                subsequent_indent="# ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return lines


def toml_value(value: Any) -> str:
    """One value in TOML, on one line. Strings with a backslash (regexes) are literal strings, so
    the file shows the pattern as the model holds it."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        if "\\" in value and "'" not in value and "\n" not in value:
            return f"'{value}'"
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        pairs = (f"{k if _BARE_KEY.match(k) else json.dumps(k)} = {toml_value(v)}" for k, v in value.items())
        return "{ " + ", ".join(pairs) + " }"
    raise TypeError(f"no TOML form for {value!r}")


def _assignment(name: str, value: Any) -> list[str]:
    line = f"{name} = {toml_value(value)}"
    if len(line) <= WIDTH or not isinstance(value, list | tuple):
        return [line]
    # A long list (filter.exclude_patterns) one item a line, as a reader compares them.
    return [f"{name} = ["] + [f"  {toml_value(v)}," for v in value] + ["]"]


def example_toml(model: type[BaseModel] | None = None) -> str:
    """config.example.toml's body: every section of ``model`` (default: ``Settings``) as a TOML
    table with each setting at its default, its description as a comment above it.

    A section's intro is its model's docstring (the first time that model appears) and the
    description of the field that holds it. A setting unset by default is shown commented out with
    its field's ``examples``, and must have one (a ValueError names it otherwise); a secret is never
    given a value, only its variable. A model met again (the nine ``[llm.stages.*]``) repeats its
    keys without repeating their descriptions."""
    model = model or Settings
    secret_list = [".".join(path) for path in secret_fields(model)]
    secrets = set(secret_list)
    # The file's first line, above the cog marker, is its title.
    lines = _comment(HEADER.format(secrets=", ".join(secret_list)))
    described: set[tuple[str, str]] = set()
    shown_docs: set[type] = set()

    def entry(path: tuple[str, ...], name: str, field: Any, value: Any) -> list[str]:
        key = ".".join((*path, name))
        desc = " ".join((field.description or "").split())
        out: list[str] = []
        if desc and (name, desc) not in described:
            described.add((name, desc))
            out += ["", *_comment(desc)]
        if key in secrets:
            return [
                *out,
                f"# {name}: a secret, refused in this file: set {_variable(path, name)} in the environment",
            ]
        examples = list(field.examples or [])
        if value is None:
            if not examples:
                raise ValueError(
                    f"setting {key} is unset by default and has no example: give its Field "
                    "examples=[...], which config.example.toml shows commented out"
                )
            return out + [f"# {name} = {toml_value(e)}" for e in examples]
        return out + _assignment(name, value) + [f"# {name} = {toml_value(e)}" for e in examples]

    def section(cls: type[BaseModel], path: tuple[str, ...], defaults: BaseModel | None, intro: str) -> None:
        body: list[str] = []
        nested = []
        for name, field, value, sub in _fields(cls, defaults):
            if sub is None:
                body += entry(path, name, field, value)
                continue
            doc = "" if sub in shown_docs else (sub.__doc__ or "").strip()
            shown_docs.add(sub)
            held = field.description or ""
            nested.append((name, sub, value, "\n\n".join(p for p in (doc, held) if p)))
        if path and (body or intro):
            lines.extend(["", "", *_comment(intro)] if intro else ["", ""])
            if body:
                lines.append(f"[{'.'.join(path)}]")
                if body[0] == "":  # the table's first key follows its header directly
                    body = body[1:]
        lines.extend(body)
        for name, sub, value, sub_intro in nested:
            section(sub, (*path, name), value, sub_intro)

    section(model, (), None, "")
    return "\n".join(lines) + "\n"
