"""The MCP server: tools, a statistics resource and the instructions that tell the client's model
when to use them. Start-up is non-blocking: the server answers ``initialize`` and ``tools/list``
at once while the database starts and the embedding model loads in the background; the first tool
call waits for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import Field

from memlane.pipeline import access
from memlane.pipeline.access import Principal
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import (
    DatabaseUnavailable,
    InvalidInput,
    MemlaneError,
    NotAllowed,
    NotFound,
    StoreError,
)
from memlane.pipeline.recall import render
from memlane.pipeline.remember.inputs import MemoryPatch
from memlane.server.auth.http import HttpAuth, principal_of
from memlane.server.auth.projects import (
    ALL,
    readable_projects,
    resolve_projects,
    wants_all,
)
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
from memlane.server.settings import Settings
from memlane.server.ui.metrics import RECALLS

log = logging.getLogger("memlane.server")

VERSION = "0.1.0"

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


class State:
    """Process-wide: one engine for every session (SSE runs the lifespan once per connection)."""

    def __init__(self, settings: Settings, engine: Engine | None = None) -> None:
        self.settings = settings
        self.engine = engine or Engine(settings.engine())
        self._startup: asyncio.Task | None = None

    def start(self) -> None:
        if self._startup is None:
            self._startup = asyncio.get_running_loop().create_task(self.engine.open())
            # A daemon thread, not the default executor: an executor thread still loading the model
            # would be joined at exit and hold up a server whose client has already gone.
            threading.Thread(target=self._load_models, name="memlane-warm", daemon=True).start()

    def _load_models(self) -> None:
        try:
            self.engine.warm()
        except Exception as e:  # the first tool call will hit the same error and report it
            log.error("loading the embedding model failed: %s", e)

    async def ready(self) -> Engine:
        self.start()
        task = self._startup
        if task.done() and (task.cancelled() or task.exception() is not None):
            # A start-up that failed before this call (the database could not start, was not
            # reachable yet) is tried again rather than its old error repeated for the life of the
            # process. Concurrent calls share the new attempt.
            log.info("retrying the start-up that failed earlier")
            task = self._startup = asyncio.get_running_loop().create_task(self.engine.open())
        try:
            await asyncio.shield(task)
        except MemlaneError as e:
            raise ToolError(f"memlane could not start its database: {e}") from None
        except Exception as e:
            log.exception("start-up failed")
            raise ToolError(f"memlane could not start: {type(e).__name__}: {e}") from None
        return self.engine

    async def close(self) -> None:
        task = self._startup
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            # Wait for the cancelled start-up to unwind: Engine.open closes a half-opened store on
            # cancellation, and closing the engine before that would leave its pool connected.
            # (asyncio.wait: the start-up's own error is not this method's to raise.)
            await asyncio.wait({task})
        await self.engine.close()


def _tool_error(e: MemlaneError) -> ToolError:
    if isinstance(e, InvalidInput):
        return ToolError(f"invalid input: {e}")
    if isinstance(e, NotAllowed):
        return ToolError(f"not allowed: {e}")
    if isinstance(e, NotFound):
        return ToolError(f"{e}; recall returns the ids of existing memories")
    if isinstance(e, DatabaseUnavailable):
        return ToolError(f"database unavailable: {e}")
    if isinstance(e, StoreError):
        return ToolError(f"memlane's database failed: {e}")
    return ToolError(str(e))


def build_server(
    settings: Settings, *, engine: Engine | None = None, auth: HttpAuth | None = None
) -> tuple[MCPServer, State]:
    """``auth``: the HTTP transports' access control (``serve`` builds it); without it every call
    is the local user's (stdio, in-process clients)."""
    state = State(settings, engine)

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
        **({"auth": auth.settings, "token_verifier": auth.verifier} if auth is not None else {}),
    )

    def caller() -> Principal | None:
        """Who is calling: None (the local user, every project) over stdio; over HTTP the principal
        of the request's bearer token (the SDK's auth context), refusing a call that has none."""
        if auth is None:
            return None
        token = get_access_token()
        if token is None:  # cannot happen behind the SDK's bearer middleware; fail closed if it does
            raise ToolError("not allowed: this call carries no valid bearer token")
        return principal_of(token)

    @asynccontextmanager
    async def engine_for_call():
        eng = await state.ready()
        try:
            yield eng
        except MemlaneError as e:
            raise _tool_error(e) from None
        except ToolError:
            raise
        except Exception as e:
            # Anything else is a bug or an outage; the SDK would show the agent only "Error
            # executing tool". Say what failed, keep the traceback in the server log.
            log.exception("tool call failed")
            raise ToolError(
                f"memlane failed unexpectedly ({type(e).__name__}: {e}); the server log has details"
            ) from None

    @server.tool(
        annotations=ToolAnnotations(
            title="Remember", read_only_hint=False, destructive_hint=False, idempotent_hint=True
        )
    )
    async def remember(
        content: Annotated[
            str, Field(description="The fact, preference, decision or event, as a self-contained sentence.")
        ],
        project: Annotated[
            str | None, Field(description="Project to file it under; omitted = the default project.")
        ] = None,
        category: Annotated[
            str | None, Field(description="e.g. preference, decision, fact, person, incident, todo.")
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Short labels to filter by later.")] = None,
        pinned: Annotated[
            bool, Field(description="Pinned memories are meant to be always relevant.")
        ] = False,
        priority: Annotated[int | None, Field(description="1 (low) to 5 (critical); default 3.")] = None,
        occurred_at: Annotated[
            str | None, Field(description="When it happened, ISO 8601 (2024-05-08 or 2024-05-08T13:56:00Z).")
        ] = None,
        expires_at: Annotated[
            str | None, Field(description="When it stops being true, ISO 8601; recall ignores it after.")
        ] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="Any JSON object; stored and returned as given.")
        ] = None,
        fact_type: Annotated[
            Literal["world", "experience", "opinion"] | None,
            Field(
                description="world: a fact about the world or others; experience: something the user or you "
                "did or went through; opinion: a preference, belief or judgement. Omitted: classified."
            ),
        ] = None,
    ) -> RememberResult:
        """Store one durable memory: a preference, decision, fact, person, event or lesson worth keeping across conversations. Storing the exact same memory twice returns the existing id with status 'duplicate'."""
        who = caller()
        async with engine_for_call() as eng:
            out = await eng.remember(
                {
                    "content": content,
                    "project": project,
                    "category": category,
                    "tags": tags,
                    "pinned": pinned,
                    "priority": priority,
                    "occurred_at": occurred_at,
                    "expires_at": expires_at,
                    "metadata": metadata,
                    "fact_type": fact_type,
                    "source": "mcp",
                },
                principal=who,
            )
        return RememberResult.of(out)

    @server.tool(
        annotations=ToolAnnotations(
            title="Ingest", read_only_hint=False, destructive_hint=False, idempotent_hint=True
        )
    )
    async def ingest(
        text: Annotated[
            str,
            Field(
                description="A conversation ('Speaker: text' lines, or a JSON list of {role, content} "
                "messages) or a document."
            ),
        ],
        kind: Annotated[
            Literal["conversation", "document"],
            Field(description="conversation: one piece per turn; document: chunks of about 256 tokens."),
        ] = "conversation",
        project: Annotated[
            str | None, Field(description="Project to file it under; omitted = the default project.")
        ] = None,
        source: Annotated[
            str | None,
            Field(
                description="Name of the conversation or document; default 'ingest:' + a hash of the text."
            ),
        ] = None,
        occurred_at: Annotated[
            str | None, Field(description="When it happened, ISO 8601; applies to every piece.")
        ] = None,
        category: Annotated[str | None, Field(description="Category for every piece.")] = None,
        tags: Annotated[list[str] | None, Field(description="Tags for every piece.")] = None,
    ) -> Annotated[CallToolResult, IngestResultOut]:
        """Store what is worth keeping from a whole conversation or document: it is split into turns or chunks, acknowledgements and filler are dropped, and pieces that repeat a stored memory are skipped. Returns each piece's decision (stored with its id, duplicate of an id, or filtered with the reason) and the counts. Prefer remember for single facts you have already distilled."""
        who = caller()
        async with engine_for_call() as eng:
            res = await eng.ingest(
                text,
                kind=kind,
                project=project,
                source=source,
                occurred_at=occurred_at,
                category=category,
                tags=tags,
                principal=who,
            )
        data = res.as_dict()
        return CallToolResult(
            content=[TextContent(type="text", text=render.to_text(data))], structured_content=data
        )

    @server.tool(annotations=ToolAnnotations(title="Recall", read_only_hint=True, open_world_hint=False))
    async def recall(
        query: Annotated[str, Field(description="What you want to know, in words.")],
        project: Annotated[
            str | list[str] | None,
            Field(
                description="Project to search; omitted = the default project. A list of projects, or '*' "
                "for every project you may read, searches them all, boosting current_project's memories."
            ),
        ] = None,
        limit: Annotated[int | None, Field(description="At most this many memories (default 10).")] = None,
        max_tokens: Annotated[
            int | None,
            Field(description="Token budget (cl100k) for this whole result as you read it (default 2000)."),
        ] = None,
        budget: Annotated[
            Literal["low", "mid", "high"],
            Field(
                description="How much work recall may do: how far the graph arm expands, and the LLM stages' work."
            ),
        ] = "mid",
        mode: Annotated[
            Literal["auto", "fast", "full"] | None,
            Field(
                description="auto: simple questions take the fast path (no query synthesis, HyDE or rerank); "
                "fast; full. Default: recall.mode (auto)."
            ),
        ] = None,
        reference_time: Annotated[
            str | None, Field(description="'Now' for relative dates, ISO 8601; default: the actual now.")
        ] = None,
        category: Annotated[str | None, Field(description="Only memories of this category.")] = None,
        tags: Annotated[list[str] | None, Field(description="Only memories carrying all these tags.")] = None,
        topics: Annotated[
            list[str] | None, Field(description="Only memories with at least one of these topics.")
        ] = None,
        fact_types: Annotated[
            list[Literal["world", "experience", "opinion"]] | None,
            Field(description="Only memories of these fact types (world, experience, opinion)."),
        ] = None,
        explain: Annotated[
            bool,
            Field(
                description="Also return full ids, scores and the pipeline trace (per-stage timings and counts)."
            ),
        ] = False,
        current_project: Annotated[
            str | None,
            Field(
                description="With several projects: the one you work in (+30%; others -20%). "
                "Default: the first listed (for '*', the default project)."
            ),
        ] = None,
        include_context: Annotated[
            bool,
            Field(
                description="Also return each memory's previous/next neighbours in its conversation or "
                "document (within a share of max_tokens)."
            ),
        ] = False,
        include_entities: Annotated[
            bool,
            Field(
                description="Also return other key facts about the entities the memories mention "
                "(within a share of max_tokens)."
            ),
        ] = False,
        ctx: Context | None = None,
    ) -> Annotated[CallToolResult, RecallResult] | InputRequiredResult:
        """Find the memories most relevant to a question, best first. Use before answering about the user, their projects or past work, and before asking the user something they may have told you already."""
        who = caller()
        async with engine_for_call() as eng:
            if wants_all(project):  # "*" is every project: only a token that covers them all may ask
                access.check(who, ALL)
            project, current_project = await resolve_projects(
                eng, project, current_project, readable=lambda names: readable_projects(names, who)
            )
            req = eng.recall_request(
                query,
                project=project,
                current_project=current_project,
                limit=limit,
                max_tokens=max_tokens,
                budget=budget,
                mode=mode,
                reference_time=reference_time,
                category=category,
                tags=tags,
                explain=explain,
                topics=topics,
                fact_types=fact_types,
                include_context=include_context,
                include_entities=include_entities,
            )
            sampler = sampler_for(ctx, eng.llm)
            res = await eng.recall(req, sampling=sampler, touch=sampler is None, principal=who)
            RECALLS.record(res.trace, source="mcp")  # the memory browser's /stats (in-process only)
            if sampler is not None:
                if sampler.pending:  # 2026-07-28 sampling: the client answers, then calls again
                    return InputRequiredResult(input_requests=sampler.pending, request_state=sampler.state())
                await eng.count_accesses(res)
        # Both blocks are the same compact structure, whose tokens the budget counted; the SDK's
        # own conversion would pretty-print the text block and send absent fields as null.
        data = dict(res.rendered)
        if explain:
            data["trace"] = res.trace.as_dict()
        return CallToolResult(
            content=[TextContent(type="text", text=render.to_text(data))], structured_content=data
        )

    @server.tool(
        annotations=ToolAnnotations(
            title="Forget", read_only_hint=False, destructive_hint=True, idempotent_hint=False
        )
    )
    async def forget(
        id: Annotated[
            str,
            Field(
                description="The memory's id or a unique start of it (8+ hex digits), as recall returns it."
            ),
        ],
    ) -> ForgetResult:
        """Delete one memory for good. Use when the user asks you to forget something or a memory is wrong beyond repair (prefer update for corrections)."""
        who = caller()
        async with engine_for_call() as eng:
            m = await eng.forget(id, principal=who)
        return ForgetResult(id=str(m.id), status="forgotten", content=m.content)

    @server.tool(
        annotations=ToolAnnotations(
            title="Update", read_only_hint=False, destructive_hint=True, idempotent_hint=True
        )
    )
    async def update(
        id: Annotated[
            str,
            Field(
                description="The memory's id or a unique start of it (8+ hex digits), as recall returns it."
            ),
        ],
        content: Annotated[str | None, Field(description="New text (re-embedded).")] = None,
        category: Annotated[str | None, Field(description="New category.")] = None,
        tags: Annotated[list[str] | None, Field(description="New tags (replace the old ones).")] = None,
        pinned: Annotated[bool | None, Field(description="Pin or unpin.")] = None,
        priority: Annotated[int | None, Field(description="1 (low) to 5 (critical).")] = None,
        occurred_at: Annotated[str | None, Field(description="ISO 8601.")] = None,
        expires_at: Annotated[str | None, Field(description="ISO 8601.")] = None,
        metadata: Annotated[
            dict[str, Any] | None, Field(description="New metadata (replaces the old object).")
        ] = None,
        fact_type: Annotated[
            Literal["world", "experience", "opinion"] | None, Field(description="New fact type.")
        ] = None,
    ) -> UpdateResult:
        """Correct or refine a memory in place. Only the fields you pass change."""
        who = caller()
        async with engine_for_call() as eng:
            patch = MemoryPatch.parse(
                eng.config,
                {
                    "content": content,
                    "category": category,
                    "tags": tags,
                    "pinned": pinned,
                    "priority": priority,
                    "occurred_at": occurred_at,
                    "expires_at": expires_at,
                    "metadata": metadata,
                    "fact_type": fact_type,
                },
            )
            m = await eng.update(id, patch, principal=who)
        return UpdateResult(
            **MemoryOut.of(m).model_dump(), redacted=[Redaction(**r) for r in patch.redacted] or None
        )

    @server.resource(
        "memlane://stats",
        name="stats",
        description="Memory counts per project, embedding model, schema version.",
        mime_type="application/json",
    )
    async def stats() -> str:
        try:
            who = caller()
            eng = await state.ready()
            data = await eng.stats(principal=who)
        except (ToolError, MemlaneError) as e:
            raise ResourceError(str(e)) from None
        data["server_version"] = VERSION
        return json.dumps(data, sort_keys=True)

    @server.resource(
        "memlane://projects/{project}/categories",
        name="categories",
        description="A project's categories with their memory counts, key terms and summaries.",
        mime_type="application/json",
    )
    async def categories(project: str) -> str:
        try:
            eng = await state.ready()
            project = unquote(project)  # the URI's segment, percent-decoded
            rows = await eng.category_summaries(project)
        except (ToolError, MemlaneError) as e:
            raise ResourceError(str(e)) from None
        return json.dumps({"project": project, "categories": [s.as_dict() for s in rows]}, ensure_ascii=False)

    return server, state
