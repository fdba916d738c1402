"""The configuration's generated documentation, rendered from the settings models.

``reference_markdown`` writes the reference tables of docs/configuration.md (its cog block calls
it); ``make docs`` (``cog --check``) fails when a setting changed and the page was not regenerated
(``make docs-generate``). Nothing here is on the server's path: only the docs import it.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from memlane.server.settings import ENV_PREFIX, Settings

__all__ = ["reference_markdown"]


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


def _section(model: type[BaseModel]) -> type[BaseModel] | None:
    """The nested settings model a field holds (``recall.decay``), or None for a value."""
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def reference_markdown(model: type[BaseModel] | None = None) -> str:
    """Every setting as Markdown tables, one per section: key, type, default, variable, meaning.

    Written for ``docs/configuration.md`` (``make docs`` checks that the page matches), so the
    descriptions in the models are the one place each setting is explained."""
    model = model or Settings
    lines: list[str] = []

    def table(
        section: type[BaseModel], path: tuple[str, ...], defaults: BaseModel | None, note: str = ""
    ) -> None:
        # A section's defaults are those of the instance its parent holds (llm.stages.extract is
        # off there, though LLMStageConfig's own default is on), so values come from `defaults`.
        rows, nested = [], []
        for name, field in section.model_fields.items():
            value = _field_default(field) if defaults is None else getattr(defaults, name)
            sub = _section(field.annotation)
            if sub is not None:
                nested.append((name, sub, value))
                continue
            key = ".".join((*path, name))
            env = ENV_PREFIX + "__".join((*path, name)).upper()
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
