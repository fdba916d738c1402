"""The resources: ``memlane://stats``, ``memlane://projects/{project}/categories`` and
``memlane://projects/{project}/instructions``.

Their errors reach the client as resource errors (a tool's would be a tool result with isError).
"""

from __future__ import annotations

import json
from urllib.parse import unquote

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from memlane.pipeline.errors import MemlaneError
from memlane.server.mcp.state import State, state_of, tool_error
from memlane.server.version import VERSION


async def stats(state: State) -> str:
    """Memory counts per project, embedding model, schema version. The SDK gives a static resource
    no context, so ``app.py`` binds ``state`` when it registers this one."""
    try:
        who = state.caller()
        eng = await state.ready()
        data = await eng.stats(principal=who)
    except ToolError as e:
        raise ResourceError(str(e)) from None
    except MemlaneError as e:  # in a tool's words ("not allowed: ...")
        raise ResourceError(str(tool_error(e))) from None
    data["server_version"] = VERSION
    return json.dumps(data, sort_keys=True)


async def instructions(project: str, ctx: Context) -> str:
    """A project's standing instructions and preferences, newest first: what a client loads as
    context at the start of a chat."""
    try:
        state = state_of(ctx)
        who = state.caller()
        eng = await state.ready()
        project = unquote(project)  # the URI's segment, percent-decoded
        found = await eng.instructions(project, principal=who)
    except ToolError as e:
        raise ResourceError(str(e)) from None
    except MemlaneError as e:  # in a tool's words ("not allowed: ...")
        raise ResourceError(str(tool_error(e))) from None
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
    try:
        state = state_of(ctx)
        who = state.caller()
        eng = await state.ready()
        project = unquote(project)  # the URI's segment, percent-decoded
        rows = await eng.category_summaries(project, principal=who)
    except ToolError as e:
        raise ResourceError(str(e)) from None
    except MemlaneError as e:  # in a tool's words ("not allowed: ...")
        raise ResourceError(str(tool_error(e))) from None
    return json.dumps({"project": project, "categories": [s.as_dict() for s in rows]}, ensure_ascii=False)
