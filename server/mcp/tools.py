"""The five tools. Each is a plain async function: its docstring is what the client's model reads,
it reaches the engine through the ``State`` the lifespan yielded (``state_of(ctx)``), and its
parameters are not written here: ``offering`` gives it those of the operation's request value
(``MemoryInput``, ``IngestRequest``, ``RecallQuery``, ``MemoryRef`` and ``MemoryPatch``), which the
SDK turns into the tool's input schema. ``app.py`` registers them with their annotations.

A tool hands its arguments to the engine as they came: the request value checks them.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, get_type_hints

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, InputRequiredResult, TextContent
from pydantic import Field

from memlane.pipeline.access import Principal
from memlane.pipeline.recall import render
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.records import Remembered
from memlane.pipeline.remember.inputs import IngestRequest, MemoryInput, MemoryPatch, MemoryRef
from memlane.pipeline.request import Request
from memlane.server.mcp.models import (
    ForgetResult,
    IngestResultOut,
    MemoryOut,
    RecallResult,
    Redaction,
    RememberResult,
    UpdateResult,
)
from memlane.server.mcp.sampling import sampler_for
from memlane.server.mcp.state import state_of
from memlane.server.ui.metrics import RECALLS

Tool = Callable[..., Awaitable[Any]]


def offering(name: str, body: Tool, *requests: type[Request]) -> Tool:
    """The tool ``name``: ``body(ctx, **arguments)`` with the parameters ``requests`` offer the MCP
    front end (``Request.parameters``), in order, as its signature, each annotated with its type
    and description, which is what the SDK makes the input schema of."""

    async def tool(ctx: Context, **arguments: Any) -> Any:
        return await body(ctx, **arguments)

    returns = get_type_hints(body, include_extras=True)["return"]
    signature = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)]
    annotations: dict[str, Any] = {"ctx": Context}
    for p in (p for request in requests for p in request.parameters("mcp")):
        annotation = Annotated[p.wire, Field(description=p.description)]  # type: ignore[name-defined]  # built at run time
        default = inspect.Parameter.empty if p.required else p.default
        signature.append(
            inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
        annotations[p.name] = annotation
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = body.__doc__
    tool.__signature__ = inspect.Signature(signature, return_annotation=returns)  # type: ignore[attr-defined] # read by inspect.signature
    tool.__annotations__ = {**annotations, "return": returns}
    return tool


def _text_and_structured(data: dict) -> CallToolResult:
    """Both blocks are the same compact structure (whose tokens recall's budget counted); the SDK's
    own conversion would pretty-print the text block and send absent fields as null."""
    return CallToolResult(
        content=[TextContent(type="text", text=render.to_text(data))], structured_content=data
    )


def stream_of(who: Principal | None) -> str:
    """The sequence a client's memories without a ``source`` continue (``Engine.remember``): over
    stdio the one client of the process, over HTTP the caller's token (clients of one token that
    remember into one project at the same time interleave; the sequence's time bound limits that)."""
    return "mcp" if who is None else f"mcp:{who.name}"


async def remember_memory(eng, who: Principal | None, **params: Any) -> Remembered:
    """What the remember tool asks of the engine, for ``params`` as the tool received them (the
    benchmark's tool path calls this too, so it measures the tool's own code)."""
    return await eng.remember(params, principal=who, stream=stream_of(who))


async def _remember(ctx: Context, **arguments: Any) -> RememberResult:
    """Store one durable memory: a preference, decision, fact, person, event or lesson worth keeping across conversations. Storing the exact same memory twice returns the existing id with status 'duplicate'. Memories remembered one after another are kept in order and linked, so recall can bring back what came around a match. A memory that states a newer value of a stored fact (the same subject and attribute) supersedes it: the older one is kept as history, listed in 'supersedes', and 'conflicts' lists stored memories it contradicts where nothing says which is right (ask the user)."""
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        out = await remember_memory(eng, who, **arguments)
    return RememberResult.of(out)


async def ingest_text(eng, who: Principal | None, text: str, **params: Any):
    """What the ingest tool asks of the engine (the benchmark's ingest path calls this too)."""
    return await eng.ingest({"text": text, **params}, principal=who)


async def _ingest(ctx: Context, **arguments: Any) -> Annotated[CallToolResult, IngestResultOut]:
    """Store what is worth keeping from a whole conversation or document: it is split into turns or chunks, acknowledgements and filler are dropped, and pieces that repeat a stored memory are skipped. Returns each piece's decision (stored with its id, duplicate of an id, or filtered with the reason) and the counts. Prefer remember for single facts you have already distilled."""
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        res = await ingest_text(eng, who, **arguments)
    return _text_and_structured(res.as_dict())


async def _recall(
    ctx: Context, **arguments: Any
) -> Annotated[CallToolResult, RecallResult] | InputRequiredResult:
    """Find the memories most relevant to a question, best first. Use before answering about the user, their projects or past work, and before asking the user something they may have told you already. What is current comes first: a memory a newer one superseded carries superseded_by and valid_until, and ranks below its successor unless the question asks about the past."""
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        sampler = sampler_for(ctx, eng.llm)
        res = await eng.recall(arguments, principal=who, sampling=sampler)
        RECALLS.record(res.trace, source="mcp")  # the memory browser's /stats (in-process only)
        if state.metrics is not None and not res.deferred:
            state.metrics.recalled(res.trace, len(res.memories))
        if sampler is not None and sampler.pending:
            # 2026-07-28 sampling: the client answers, then calls again (no access was counted)
            return InputRequiredResult(input_requests=sampler.pending, request_state=sampler.state())
    data = dict(res.rendered)
    if arguments.get("explain"):
        data["trace"] = res.trace.as_dict()
    return _text_and_structured(data)


async def _forget(ctx: Context, **arguments: Any) -> ForgetResult:
    """Delete one memory for good. Use when the user asks you to forget something or a memory is wrong beyond repair (prefer update for corrections)."""
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        m = await eng.forget(arguments["id"], principal=who)
    return ForgetResult(id=str(m.id), status="forgotten", content=m.content)


async def _update(ctx: Context, **arguments: Any) -> UpdateResult:
    """Correct or refine a memory in place. Only the fields you pass change. What it said before is kept as an earlier version (memlane history), and new content may supersede another memory as remember's does."""
    changes = dict(arguments)
    memory_id = changes.pop("id")
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        patch = MemoryPatch.parse(eng.config, changes)
        m = await eng.update(memory_id, patch, principal=who)
    return UpdateResult(
        **MemoryOut.of(m).model_dump(), redacted=[Redaction(**r) for r in patch.redacted] or None
    )


remember = offering("remember", _remember, MemoryInput)
ingest = offering("ingest", _ingest, IngestRequest)
recall = offering("recall", _recall, RecallQuery)
forget = offering("forget", _forget, MemoryRef)
update = offering("update", _update, MemoryRef, MemoryPatch)
