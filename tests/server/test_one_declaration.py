"""Every front end is made from the request values (``pipeline/request.py``): a field added to a
variant of ``RecallQuery`` appears in the recall tool's input schema, in ``memlane recall --help``
and in the browser's recall form, with nothing else written; and each request's fields are all
either offered or named, with a reason, as not offered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import httpx2 as httpx
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.remember.inputs import IngestRequest, MemoryInput, MemoryPatch, MemoryRef
from memlane.pipeline.request import FRONTS, Filters, Param, Request
from memlane.pipeline.validate import FACT_TYPES
from memlane.server.cli import main as cli
from memlane.server.mcp import tools
from memlane.server.ui.app import create_app

TOOLS_LIST = Path(__file__).resolve().parents[1] / "data" / "tools_list.json"
REQUESTS = (RecallQuery, Filters, MemoryInput, MemoryPatch, MemoryRef, IngestRequest)


class WithNovelty(RecallQuery):
    """RecallQuery with one more parameter, as a contributor would add it."""

    prefer_novel: Annotated[bool, Param("Prefer memories the caller has not seen yet.")] = False


def golden(tool: str) -> dict:
    return next(t for t in json.loads(TOOLS_LIST.read_text(encoding="utf-8")) if t["name"] == tool)


async def listed(*generated) -> dict[str, dict]:
    server = MCPServer("declaration")
    for fn in generated:
        server.add_tool(fn)
    async with Client(server) as client:
        found = (await client.list_tools()).tools
    return {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in found}


@pytest.mark.anyio
async def test_the_generated_tools_have_the_golden_input_schemas():
    generated = await listed(tools.remember, tools.ingest, tools.recall, tools.forget, tools.update)
    for name, tool in generated.items():
        assert tool["inputSchema"] == golden(name)["inputSchema"], name  # the order: make docs checks it


@pytest.mark.anyio
async def test_a_field_added_to_a_copy_of_recallquery_reaches_the_tool_the_cli_and_the_form(engine):
    schema = (await listed(tools.offering("recall", tools._recall, WithNovelty)))["recall"]["inputSchema"]
    before = golden("recall")["inputSchema"]
    assert set(schema["properties"]) - set(before["properties"]) == {"prefer_novel"}
    assert schema["properties"]["prefer_novel"] == {
        "default": False,
        "description": "Prefer memories the caller has not seen yet.",
        "title": "Prefer Novel",
        "type": "boolean",
    }

    recall_help = next(
        a.choices["recall"] for a in cli._parser(recall=WithNovelty)._actions if a.dest == "command"
    ).format_help()
    assert "--prefer-novel" in recall_help and "Prefer memories the caller has not seen yet." in recall_help
    plain = next(a.choices["recall"] for a in cli._parser()._actions if a.dest == "command").format_help()
    assert "--prefer-novel" not in plain

    async def get_engine():
        return engine

    app = create_app(get_engine, allowed_hosts=["testserver"], recall_query=WithNovelty)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as c:
        page = (await c.get("/recall")).text
    assert 'name="prefer_novel"' in page and 'title="Prefer memories the caller has not seen yet."' in page


def test_every_field_is_offered_or_named_as_not_offered_with_a_reason():
    for request in REQUESTS:
        declared = {p.name for p in request.declared()}
        for name, (fronts, why) in request.NOT_OFFERED.items():
            assert set(fronts) <= set(FRONTS) and len(why) > 10, (request, name)
        for front in FRONTS:
            offered = {p.name for p in request.parameters(front)}
            assert offered == declared - {n for n, (f, _) in request.NOT_OFFERED.items() if front in f}


def test_a_field_without_a_param_is_refused():
    class Undeclared(Request):
        hidden: int = 0

    with pytest.raises(TypeError, match="Undeclared.hidden has no Param"):
        Undeclared.parameters("mcp")


def test_the_recall_filters_the_tool_leaves_out_are_offered_by_the_cli_and_the_browser():
    mcp = {p.name for p in RecallQuery.parameters("mcp")}
    for front in ("cli", "ui"):
        assert {"since", "until", "pinned", "as_of", "include_history", "budget"} <= {
            p.name for p in RecallQuery.parameters(front)
        }
    assert not {"since", "until", "pinned", "ablation", "count_accesses"} & mcp


def test_fact_type_help_lists_every_fact_type():
    sub = next(a for a in cli._parser()._actions if a.dest == "command").choices
    for command in ("recall", "remember"):
        text = " ".join(sub[command].format_help().split())
        assert all(t in text for t in FACT_TYPES), command
