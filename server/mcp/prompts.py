"""The three prompts a user picks from the client's prompt menu, each rendered from its versioned
template in ``prompts/`` (``recall_context``, ``remember_conversation``, ``project_brief``), and the
completions (``completion/complete``) of their ``project`` and ``topic`` arguments and of the
categories resource's ``{project}``.

A prompt's errors reach the client as prompt errors: the SDK turns an exception into an error
response, and the message is memlane's (``tool_error``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)
from pydantic import Field

from memlane.pipeline import access
from memlane.pipeline.errors import MemlaneError
from memlane.pipeline.llm import prompts as templates
from memlane.pipeline.records import Memory
from memlane.server.mcp.state import State, state_of, tool_error

MAX_COMPLETIONS = 100  # the spec's limit on values in one completion
Project = Annotated[str | None, Field(description="The project (default: the server's default project).")]


def _lines(memories: list[tuple[Memory, float]]) -> str:
    """One line per memory: its date when it has one, and superseded ones marked."""
    out = []
    for m, _ in memories:
        when = f"[{m.occurred_at.date().isoformat()}] " if m.occurred_at else ""
        old = " (superseded)" if m.superseded_by is not None else ""
        out.append(f"- {when}{m.content}{old}")
    return "\n".join(out) or "(nothing stored)"


def _message(name: str, **values: str) -> str:
    system, user = templates.get(name).render(**values)
    return f"{system}\n\n{user}"


async def _recall(
    state: State, query: str, project: str, limit: int, **extra: Any
) -> list[tuple[Memory, float]]:
    try:
        eng = await state.ready()
        res = await eng.recall(
            {"query": query, "project": project, "limit": limit, "count_accesses": False, **extra},
            principal=state.caller(),
        )
    except MemlaneError as e:
        raise tool_error(e) from None
    return list(res.memories)


async def _project(state: State, project: str | None) -> str:
    if project:
        return project
    try:
        return (await state.ready()).config.default_project
    except MemlaneError as e:
        raise tool_error(e) from None


async def recall_context(
    ctx: Context,
    topic: Annotated[str, Field(description="What to recall: a subject, a question, a name.")],
    project: Project = None,
) -> str:
    """The memories memlane holds on a topic, placed into the conversation as context."""
    state = state_of(ctx)
    name = await _project(state, project)
    found = await _recall(state, topic, name, 15)
    return _message("recall_context", topic=topic, project=name, memories=_lines(found))


async def remember_conversation(ctx: Context, project: Project = None) -> str:
    """Asks the model to store this chat's durable facts, decisions and preferences with remember."""
    state = state_of(ctx)
    # One source per use: the chat's facts form one sequence, apart from other chats' facts.
    source = f"chat:{datetime.now(UTC).strftime('%Y-%m-%dT%H:%MZ')}"
    return _message("remember_conversation", project=await _project(state, project), source=source)


async def project_brief(ctx: Context, project: Project = None) -> str:
    """What memlane knows about a project: current facts first, instructions and preferences, open questions."""
    state = state_of(ctx)
    name = await _project(state, project)
    facts = await _recall(state, f"{name}: key facts, decisions and current state", name, 20)
    # The stored instructions and preferences (their fact types), then those named by a category
    # (imports and remember calls that name one) and by their words.
    prefs: dict[Any, tuple[Memory, float]] = {}
    try:
        for m in await (await state.ready()).instructions(name, principal=state.caller()):
            prefs.setdefault(m.id, (m, 1.0))
    except MemlaneError as e:
        raise tool_error(e) from None
    for category in ("preferences", "instructions"):
        for hit in await _recall(state, f"{name} {category}", name, 10, category=category):
            prefs.setdefault(hit[0].id, hit)
    for hit in await _recall(state, "how I want things done: always, never, prefer", name, 10):
        prefs.setdefault(hit[0].id, hit)
    questions = await _recall(state, "open questions, undecided, pending, to do, unknown", name, 10)
    return _message(
        "project_brief",
        project=name,
        facts=_lines(facts),
        preferences=_lines(list(prefs.values())[:15]),
        questions=_lines(questions),
    )


# (MCP name, function, title) in the order prompts/list shows them.
PROMPTS: list[tuple[str, Callable[..., Awaitable[str]], str]] = [
    ("recall-context", recall_context, "Recall context on a topic"),
    ("remember-conversation", remember_conversation, "Remember this conversation"),
    ("project-brief", project_brief, "Brief me on a project"),
]


def completer(state: State):
    """``completion/complete``: project names (those the caller may read) for a ``project``
    argument or a project resource's ``{project}`` (categories, instructions); the project's topics and categories for
    ``topic``. Case-insensitive prefix match."""

    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion | None:
        if argument.name not in ("project", "topic"):
            return None
        try:
            eng = await state.ready()
            who = state.caller()
            projects = await eng.project_names()
            readable = access.readable_projects(who, projects)
            if argument.name == "project":
                values = sorted(readable)
            else:
                given = (context.arguments or {}).get("project") if context is not None else None
                name = given or eng.config.default_project
                if name not in readable:
                    return Completion(values=[], total=0, has_more=False)
                topics = [t for t, _, _, _ in await eng.store.project_topics(name)]
                values = topics + [c for c in await eng.store.category_names(name) if c not in topics]
        except MemlaneError:
            return None
        prefix = argument.value.lower()
        matched = [v for v in values if v.lower().startswith(prefix)]
        return Completion(
            values=matched[:MAX_COMPLETIONS], total=len(matched), has_more=len(matched) > MAX_COMPLETIONS
        )

    return complete
