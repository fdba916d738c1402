"""The tool tables of README.md and docs/tools.md, rendered from what ``tools/list`` returns.

The cog blocks in those pages call ``tools_markdown`` and ``parameters_markdown``; ``make docs``
(``cog --check``) fails when a tool's signature or docstring changed and the pages were not
regenerated (``make docs-generate``). Nothing here is on the server's path: only the docs import it.

The tools are read from a server that ``build_server`` assembled, through ``MCPServer.list_tools``
(what the ``tools/list`` handler returns) and in its wire form (``inputSchema``), without starting
the lifespan: no database, no model.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel

__all__ = ["list_tools", "parameters_markdown", "result_markdown", "signature", "tools_markdown"]


def list_tools() -> list[dict[str, Any]]:
    """``tools/list``'s tools, in its order, as the wire has them (camelCase keys, no nulls)."""
    from memlane.server.mcp.app import build_server
    from memlane.server.settings import Settings

    server, _state = build_server(Settings())
    tools = asyncio.run(server.list_tools())
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def _variants(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The schema's alternatives without the null one (an optional parameter's ``anyOf``)."""
    options = schema.get("anyOf", [schema])
    return [s for s in options if s.get("type") != "null"]


def _enum(schema: dict[str, Any]) -> list[Any] | None:
    variants = _variants(schema)
    return variants[0]["enum"] if len(variants) == 1 and "enum" in variants[0] else None


def _enum_text(values: list[Any], pipe: str) -> str:
    return pipe.join(json.dumps(v) for v in values)


def signature(tool: dict[str, Any], *, pipe: str = "|") -> str:
    """``name(required, optional?, choice?: "a"|"b")``, the parameters in the schema's order.
    ``pipe``: what separates an enum's values (GitHub needs ``\\|`` inside a table's code span)."""
    schema = tool.get("inputSchema", {})
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema.get("properties", {}).items():
        text = name if name in required else f"{name}?"
        values = _enum(prop)
        if values is not None:
            text += ": " + _enum_text(values, pipe)
        params.append(text)
    return f"{tool['name']}({', '.join(params)})"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped (outside code spans, both GitHub and
    MkDocs take ``\\|``)."""
    return " ".join(text.split()).replace("|", "\\|")


def tools_markdown(*, github: bool = False) -> str:
    """One row per tool: its signature and its description (the docstring the client's model reads).
    ``github``: for README.md, where a pipe inside a table's code span must be escaped (MkDocs would
    show the backslash)."""
    pipe = "\\|" if github else "|"
    rows = ["| tool | what it does |", "|---|---|"]
    for tool in list_tools():
        rows.append(f"| `{signature(tool, pipe=pipe)}` | {_cell(tool.get('description', ''))} |")
    return "\n".join(rows) + "\n"


def _type(schema: dict[str, Any]) -> str:
    """A parameter's JSON type in words: ``string``, ``array of string``, an enum's values."""
    names = []
    for s in _variants(schema):
        if "enum" in s:
            names.append(" \\| ".join(f"`{json.dumps(v)}`" for v in s["enum"]))
        elif s.get("type") == "array":
            names.append(f"array of {_type(s.get('items', {}))}")
        else:
            names.append(s.get("type", "any"))
    return " or ".join(names) or "any"


def parameters_markdown(*, level: int = 3) -> str:
    """Per tool, a heading and a table of its parameters: type, default, description."""
    out = []
    for tool in list_tools():
        schema = tool.get("inputSchema", {})
        required = set(schema.get("required", []))
        out += [f"{'#' * level} {tool['name']}", "", "| parameter | type | default | description |"]
        out.append("|---|---|---|---|")
        for name, prop in schema.get("properties", {}).items():
            if name in required:
                default = "(required)"
            elif prop.get("default") is None:
                default = "-"
            else:
                default = f"`{json.dumps(prop['default'])}`"
            out.append(f"| `{name}` | {_type(prop)} | {default} | {_cell(prop.get('description', ''))} |")
        out.append("")
    return "\n".join(out)


def _shape(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """A result field's JSON in brief: ``string``, ``[{id, similarity}]`` for a list of objects."""
    if "$ref" in schema:
        target = defs[schema["$ref"].rsplit("/", 1)[-1]]
        return "{" + ", ".join(target.get("properties", {})) + "}"
    if schema.get("type") == "array":
        return f"[{_shape(schema.get('items', {}), defs)}]"
    return " or ".join(s.get("type", "any") for s in _variants(schema)) or "any"


def result_markdown(
    model: type[BaseModel], tool: str, *, table: bool = True, notes: dict[str, str] | None = None
) -> str:
    """What ``tool`` returns, from its result model: a sentence naming the fields always there and
    those present only when they apply (a ``None`` default: the model leaves them out), then, with
    ``table``, each field's JSON shape and description (``notes``: the page's words for a field the
    model leaves undescribed, since a description there would change what ``tools/list`` says)."""
    schema = model.model_json_schema(mode="serialization")
    defs = schema.get("$defs", {})
    always = [n for n, f in model.model_fields.items() if f.default is not None or f.default_factory]
    when = [n for n in model.model_fields if n not in always]
    text = f"`{tool}` returns `{{{', '.join(always)}}}`"
    if when:
        listed = " and ".join(", ".join(f"`{n}`" for n in when).rsplit(", ", 1))
        text += f", and {listed} when {'it applies' if len(when) == 1 else 'they apply'}"
    if not table:
        return text + ".\n"
    rows = [text + ":", "", "| field | JSON | what it holds |", "|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        about = prop.get("description") or (notes or {}).get(name, "")
        rows.append(f"| `{name}` | `{_shape(prop, defs)}` | {_cell(about)} |")
    return "\n".join(rows) + "\n"
