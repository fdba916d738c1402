"""The tool tables of README.md and docs/tools.md, rendered from ``tools/list``
(``server/mcp/doc_tables.py``): every tool in its order, its parameters as its schema has them, its
description as the client's model reads it. No database: the server is built, never started."""

from __future__ import annotations

import re

import pytest

from memlane.server.mcp import doc_tables
from memlane.server.mcp.app import TOOLS


@pytest.fixture(scope="module")
def tools() -> list[dict]:
    return doc_tables.list_tools()


def test_list_tools_is_the_wire_form_in_the_registered_order(tools):
    assert [t["name"] for t in tools] == [fn.__name__ for fn, _ in TOOLS]
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object"
        assert tool["description"] == " ".join(tool["description"].split())  # one line, as read


def test_signature_marks_optional_parameters_and_lists_enum_values():
    tool = {
        "name": "pick",
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "kind": {"enum": ["a", "b"], "type": "string", "default": "a"},
                "mode": {"anyOf": [{"enum": ["x", "y"], "type": "string"}, {"type": "null"}]},
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            },
            "required": ["query"],
        },
    }
    assert doc_tables.signature(tool) == 'pick(query, kind?: "a"|"b", mode?: "x"|"y", limit?)'
    assert doc_tables.signature(tool, pipe="\\|") == 'pick(query, kind?: "a"\\|"b", mode?: "x"\\|"y", limit?)'


def test_tools_table_has_one_row_per_tool_with_its_signature_and_description(tools):
    rows = [r for r in doc_tables.tools_markdown().splitlines() if r.startswith("| `")]
    assert len(rows) == len(tools)
    for row, tool in zip(rows, tools, strict=True):
        sig = re.match(r"\| `([^`]*)` \| (.*) \|$", row)
        assert sig is not None, row
        name, params = re.fullmatch(r"(\w+)\((.*)\)", sig.group(1)).groups()
        assert name == tool["name"]
        schema = tool["inputSchema"]
        shown = [p.split(":")[0] for p in params.split(", ")] if params else []
        expected = [n if n in schema.get("required", []) else f"{n}?" for n in schema["properties"]]
        assert shown == expected
        assert sig.group(2) == tool["description"].replace("|", "\\|")


def test_github_flavour_escapes_the_pipes_inside_code_spans():
    plain, github = doc_tables.tools_markdown(), doc_tables.tools_markdown(github=True)
    assert '"conversation"|"document"' in plain
    assert '"conversation"\\|"document"' in github
    for row in github.splitlines()[2:]:
        # Unescaped pipes only as cell separators: the rows have two cells.
        assert len(re.findall(r"(?<!\\)\|", row)) == 3, row


def test_parameters_tables_give_every_parameter_its_type_default_and_description(tools):
    text = doc_tables.parameters_markdown(level=3)
    sections = text.split("### ")[1:]
    assert [s.split("\n", 1)[0] for s in sections] == [t["name"] for t in tools]
    for section, tool in zip(sections, tools, strict=True):
        schema = tool["inputSchema"]
        rows = {r.split(" | ")[0].strip("| `"): r for r in section.splitlines() if r.startswith("| `")}
        assert list(rows) == list(schema["properties"])
        for name, prop in schema["properties"].items():
            assert ("(required)" in rows[name]) == (name in schema.get("required", []))
            assert " ".join(prop["description"].split()).replace("|", "\\|") in rows[name]
    recall = sections[[t["name"] for t in tools].index("recall")]
    assert '| `budget` | `"low"` \\| `"mid"` \\| `"high"` | `"mid"` |' in recall
    assert "| `project` | string or array of string | - |" in recall
    assert "| `explain` | boolean | `false` |" in recall


def test_remembers_result_is_rendered_from_its_model_with_every_field():
    from memlane.server.mcp.models import RememberResult

    text = doc_tables.result_markdown(RememberResult, "remember", notes={"id": "its id"})
    sentence = text.splitlines()[0]
    shown = re.search(r"`\{(.*?)\}`", sentence).group(1).split(", ")
    assert {"supersedes", "conflicts", "similar"} <= set(shown)
    rows = {line.split("|")[1].strip(" `") for line in text.splitlines()[4:] if line.startswith("| `")}
    assert rows == set(RememberResult.model_fields)
    assert "| `id` | `string` | its id |" in text  # the page's note where the model has none
    assert "| `supersedes` | `[{id, content, date}]` |" in text
    # Fields the model leaves out when absent are named apart, not in the braces.
    assert "superseded_by" not in shown and "`superseded_by`" in sentence


def test_a_result_field_present_only_when_it_applies_is_said_so():
    from pydantic import BaseModel, Field

    class Out(BaseModel):
        id: str
        items: list[int] = Field(default_factory=list, description="Always a list.")
        extra: str | None = Field(default=None, description="Only sometimes.")

    text = doc_tables.result_markdown(Out, "probe", table=False)
    assert text == "`probe` returns `{id, items}`, and `extra` when it applies.\n"
