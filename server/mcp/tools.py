"""The five tools. Each is a plain async function: its docstring is what the client's model reads,
its parameters are described in ``params.py``, and it reaches the engine through the ``State`` the
lifespan yielded (``state_of(ctx)``). ``app.py`` registers them with their annotations.

A tool hands its arguments to the engine as they came (``_arguments``): they are the fields of the
operation's request value (``MemoryInput``, ``RecallQuery``, ``MemoryPatch``), which checks them.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult, InputRequiredResult, TextContent

from memlane.pipeline.access import Principal
from memlane.pipeline.recall import render
from memlane.pipeline.records import Remembered
from memlane.pipeline.remember.inputs import MemoryPatch
from memlane.server.mcp import params as p
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


def _text_and_structured(data: dict) -> CallToolResult:
    """Both blocks are the same compact structure (whose tokens recall's budget counted); the SDK's
    own conversion would pretty-print the text block and send absent fields as null."""
    return CallToolResult(
        content=[TextContent(type="text", text=render.to_text(data))], structured_content=data
    )


def _arguments(given: dict[str, Any]) -> dict[str, Any]:
    """A tool's arguments, from its ``locals()`` on entry: every parameter but the MCP context."""
    return {name: value for name, value in given.items() if name != "ctx"}


def stream_of(who: Principal | None) -> str:
    """The sequence a client's memories without a ``source`` continue (``Engine.remember``): over
    stdio the one client of the process, over HTTP the caller's token (clients of one token that
    remember into one project at the same time interleave; the sequence's time bound limits that)."""
    return "mcp" if who is None else f"mcp:{who.name}"


async def remember_memory(eng, who: Principal | None, **params: Any) -> Remembered:
    """What the remember tool asks of the engine, for ``params`` as the tool received them (the
    benchmark's tool path calls this too, so it measures the tool's own code)."""
    return await eng.remember(params, principal=who, stream=stream_of(who))


async def remember(
    ctx: Context,
    content: p.Content,
    project: p.Project = None,
    category: p.Category = None,
    tags: p.Tags = None,
    pinned: p.Pinned = False,
    priority: p.Priority = None,
    occurred_at: p.OccurredAt = None,
    expires_at: p.ExpiresAt = None,
    metadata: p.Metadata = None,
    fact_type: p.FactType = None,
    source: p.RememberSource = None,
) -> RememberResult:
    """Store one durable memory: a preference, decision, fact, person, event or lesson worth keeping across conversations. Storing the exact same memory twice returns the existing id with status 'duplicate'. Memories remembered one after another are kept in order and linked, so recall can bring back what came around a match. A memory that states a newer value of a stored fact (the same subject and attribute) supersedes it: the older one is kept as history, listed in 'supersedes', and 'conflicts' lists stored memories it contradicts where nothing says which is right (ask the user)."""
    arguments = _arguments(locals())
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        out = await remember_memory(eng, who, **arguments)
    return RememberResult.of(out)


async def ingest_text(eng, who: Principal | None, text: str, **params: Any):
    """What the ingest tool asks of the engine (the benchmark's ingest path calls this too)."""
    return await eng.ingest(text, principal=who, **params)


async def ingest(
    ctx: Context,
    text: p.Text,
    kind: p.Kind = "conversation",
    project: p.Project = None,
    source: p.IngestSource = None,
    occurred_at: p.EveryPieceOccurredAt = None,
    category: p.EveryPieceCategory = None,
    tags: p.EveryPieceTags = None,
) -> Annotated[CallToolResult, IngestResultOut]:
    """Store what is worth keeping from a whole conversation or document: it is split into turns or chunks, acknowledgements and filler are dropped, and pieces that repeat a stored memory are skipped. Returns each piece's decision (stored with its id, duplicate of an id, or filtered with the reason) and the counts. Prefer remember for single facts you have already distilled."""
    arguments = _arguments(locals())
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        res = await ingest_text(eng, who, **arguments)
    return _text_and_structured(res.as_dict())


async def recall(
    ctx: Context,
    query: p.Query,
    project: p.Projects = None,
    limit: p.Limit = None,
    max_tokens: p.MaxTokens = None,
    budget: p.Budget = "mid",
    mode: p.Mode = None,
    reference_time: p.ReferenceTime = None,
    category: p.OnlyCategory = None,
    tags: p.OnlyTags = None,
    topics: p.OnlyTopics = None,
    fact_types: p.OnlyFactTypes = None,
    explain: p.Explain = False,
    current_project: p.CurrentProject = None,
    include_context: p.IncludeContext = False,
    include_entities: p.IncludeEntities = False,
    as_of: p.AsOf = None,
    include_history: p.IncludeHistory = False,
) -> Annotated[CallToolResult, RecallResult] | InputRequiredResult:
    """Find the memories most relevant to a question, best first. Use before answering about the user, their projects or past work, and before asking the user something they may have told you already. What is current comes first: a memory a newer one superseded carries superseded_by and valid_until, and ranks below its successor unless the question asks about the past."""
    arguments = _arguments(locals())
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
    if explain:
        data["trace"] = res.trace.as_dict()
    return _text_and_structured(data)


async def forget(ctx: Context, id: p.MemoryId) -> ForgetResult:
    """Delete one memory for good. Use when the user asks you to forget something or a memory is wrong beyond repair (prefer update for corrections)."""
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        m = await eng.forget(id, principal=who)
    return ForgetResult(id=str(m.id), status="forgotten", content=m.content)


async def update(
    ctx: Context,
    id: p.MemoryId,
    content: p.NewContent = None,
    category: p.NewCategory = None,
    tags: p.NewTags = None,
    pinned: p.NewPinned = None,
    priority: p.NewPriority = None,
    occurred_at: p.NewTime = None,
    expires_at: p.NewTime = None,
    metadata: p.NewMetadata = None,
    fact_type: p.NewFactType = None,
) -> UpdateResult:
    """Correct or refine a memory in place. Only the fields you pass change. What it said before is kept as an earlier version (memlane history), and new content may supersede another memory as remember's does."""
    changes = _arguments(locals())
    memory_id = changes.pop("id")
    state = state_of(ctx)
    who = state.caller()
    async with state.call(ctx) as eng:
        patch = MemoryPatch.parse(eng.config, changes)
        m = await eng.update(memory_id, patch, principal=who)
    return UpdateResult(
        **MemoryOut.of(m).model_dump(), redacted=[Redaction(**r) for r in patch.redacted] or None
    )
