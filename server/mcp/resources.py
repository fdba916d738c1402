"""The resources: ``memlane://stats``, ``memlane://projects/{project}/categories`` and
``memlane://projects/{project}/instructions``.

Their errors reach the client as resource errors (a tool's would be a tool result with isError).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import unquote

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from memlane.pipeline.errors import MemlaneError
from memlane.server.mcp.state import State, state_of, tool_error
from memlane.server.version import VERSION


@asynccontextmanager
async def _as_resource_errors() -> AsyncIterator[None]:
    """A tool's error, or memlane's in a tool's words ("not allowed: ..."), as a resource error."""
    try:
        yield
    except ToolError as e:
        raise ResourceError(str(e)) from None
    except MemlaneError as e:
        raise ResourceError(str(tool_error(e))) from None


async def stats(state: State) -> str:
    """Memory counts per project, embedding model, schema version. The SDK gives a static resource
    no context, so ``app.py`` binds ``state`` when it registers this one."""
    async with _as_resource_errors():
        who = state.caller()
        eng = await state.ready()
        data = await eng.stats(principal=who)
    data["server_version"] = VERSION
    return json.dumps(data, sort_keys=True)


async def instructions(project: str, ctx: Context) -> str:
    """A project's standing instructions and preferences, newest first: what a client loads as
    context at the start of a chat."""
    project = unquote(project)  # the URI's segment, percent-decoded
    async with _as_resource_errors():
        state = state_of(ctx)
        who = state.caller()
        found = await (await state.ready()).instructions(project, principal=who)
    items = [
        {
            "id": str(m.id),
            "content": m.content,
            "kind": m.fact_type,
            "date": (m.occurred_at or m.created_at).date().isoformat(),
        }
        for m in found
    ]
    return json.dumps({"project": project, "instructions": items}, ensure_ascii=False)


async def categories(project: str, ctx: Context) -> str:
    """A project's categories with their memory counts, key terms and summaries."""
    project = unquote(project)  # the URI's segment, percent-decoded
    async with _as_resource_errors():
        state = state_of(ctx)
        who = state.caller()
        rows = await (await state.ready()).category_summaries(project, principal=who)
    return json.dumps({"project": project, "categories": [s.as_dict() for s in rows]}, ensure_ascii=False)
