"""The MCP server, assembled: the instructions that tell the client's model when to use memlane,
the tools (``tools.py``) and resources (``resources.py``) registered in one place, and the lifespan
that hands every call the process's ``State``.

Start-up is non-blocking: the server answers ``initialize`` and ``tools/list`` at once while the
database starts and the embedding model loads in the background; the first tool call waits for them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from memlane.pipeline import telemetry
from memlane.pipeline.engine import Engine
from memlane.server.auth.http import HttpAuth
from memlane.server.mcp import prompts, resources, tools
from memlane.server.mcp.state import State, outcome_of
from memlane.server.settings import Settings
from memlane.server.version import VERSION

if TYPE_CHECKING:
    from memlane.server.metrics import Metrics

__all__ = ["INSTRUCTIONS", "State", "build_server"]

INSTRUCTIONS = """\
memlane is your long-term memory: it keeps what you learn across conversations.

Call `remember` whenever you learn something durable: the user's preferences and habits, decisions
and their reasons, facts about people, projects, deadlines and incidents, corrections the user
makes. One fact per call, in a full sentence that makes sense on its own later ("Alice prefers
tabs over spaces in Python projects", not "tabs"). Pass `occurred_at` when the fact has a date and
`project` to keep a project's memories apart.

Call `recall` before you answer anything about the user, their projects or past work, and before
you ask the user something they may already have told you. Ask in words ("which database did we
pick for billing and why?"). Use `update` when a memory has become wrong and `forget` when the user
asks you to forget something.

Call `ingest` to hand over a whole conversation or document when the user asks you to keep it (or a
long session ends): memlane splits it, drops acknowledgements and filler, skips what it already
knows, and says what it stored. `remember` answers with `similar` memories when one already says
nearly the same: update that one instead of keeping both when the new one replaces it.
"""

# In the order tools/list shows them (a client shows them in that order; tests pin it). Every tool
# touches only memlane's own store: none is open-world.
TOOLS: list[tuple[Callable[..., Any], ToolAnnotations]] = [
    (
        tools.remember,
        ToolAnnotations(
            title="Remember a fact",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    ),
    (
        tools.ingest,
        ToolAnnotations(
            title="Ingest a conversation or document",
            read_only_hint=False,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    ),
    (tools.recall, ToolAnnotations(title="Recall memories", read_only_hint=True, open_world_hint=False)),
    (
        tools.forget,
        ToolAnnotations(
            title="Forget a memory",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=False,
            open_world_hint=False,
        ),
    ),
    (
        tools.update,
        ToolAnnotations(
            title="Update a memory",
            read_only_hint=False,
            destructive_hint=True,
            idempotent_hint=True,
            open_world_hint=False,
        ),
    ),
]


def build_server(
    settings: Settings,
    *,
    engine: Engine | None = None,
    auth: HttpAuth | None = None,
    metrics: Metrics | None = None,
) -> tuple[MCPServer, State]:
    """``auth``: the HTTP transports' access control (``serve`` builds it); without it every call
    is the local user's (stdio, in-process clients). ``metrics``: where tool calls and recalls are
    counted (``server/metrics.py``); None: nowhere."""
    state = State(settings, engine, auth, metrics)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[State]:
        state.start()
        yield state

    server = MCPServer(
        "memlane",
        title="memlane",
        description="Long-term memory for LLM agents",
        instructions=INSTRUCTIONS,
        version=VERSION,
        lifespan=lifespan,
        log_level=settings.server.log_level,
        auth=auth.settings if auth is not None else None,
        token_verifier=auth.verifier if auth is not None else None,
    )
    for fn, hints in TOOLS:
        # The title twice: the tool's own (2025-06-18 on) and in its annotations (older clients).
        server.add_tool(fn, title=hints.title, annotations=hints)
    _observe_tool_calls(server, metrics)
    server.resource(
        "memlane://stats",
        name="stats",
        title="Memory statistics",
        description="Memory counts per project, embedding model, schema version.",
        mime_type="application/json",
    )(partial(resources.stats, state))
    server.resource(
        "memlane://projects/{project}/categories",
        name="categories",
        title="Categories of a project",
        description="A project's categories with their memory counts, key terms and summaries.",
        mime_type="application/json",
    )(resources.categories)
    server.resource(
        "memlane://projects/{project}/instructions",
        name="instructions",
        title="Standing instructions of a project",
        description='The user\'s standing instructions and preferences for a project ("always ...", '
        '"I prefer ..."), newest first: load them as context at the start of a chat.',
        mime_type="application/json",
    )(resources.instructions)
    for name, fn, title in prompts.PROMPTS:
        server.prompt(name=name, title=title, description=fn.__doc__)(fn)
    server.completion()(prompts.completer(state))
    return server, state


def _observe_tool_calls(server: MCPServer, metrics: Metrics | None) -> None:
    """Every tool call through ``server.call_tool`` (which the SDK's handler looks up on the
    instance), argument validation by the SDK included: a span when traces are on (a child of the
    SDK's own ``tools/call`` span) and, with ``metrics``, counted by tool and outcome and timed."""
    call_tool = server.call_tool
    known = {fn.__name__ for fn, _ in TOOLS}

    async def observed(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        tool = name if name in known else "unknown"  # a name a caller made up is no label
        started = time.perf_counter()
        outcome = "error"
        with telemetry.span(f"memlane.tool {tool}", **{"memlane.tool": tool}) as span:
            try:
                result = await call_tool(name, arguments, context)
                outcome = "ok"
                return result
            except BaseException as e:
                outcome = outcome_of(e)
                raise
            finally:
                span.set("memlane.outcome", outcome)
                if metrics is not None:
                    metrics.tool_call(tool, outcome, time.perf_counter() - started)

    server.call_tool = observed  # type: ignore[method-assign]  # the SDK's handler looks it up on the instance
