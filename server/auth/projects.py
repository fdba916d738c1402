"""Which projects a recall may span: ``project="*"`` means every project the caller may read.

The one place that decides it, so per-caller access rules plug in here: ``readable_projects``
gets every project in the store and returns those the caller may read. Over stdio and on the
command line the caller is the local user, who may read them all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memlane.pipeline import access
from memlane.pipeline.access import Principal
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput

ALL = "*"


def readable_projects(projects: list[str], caller: Principal | None = None) -> list[str]:
    """The projects ``caller`` may read, of ``projects`` (every project in the store): all of them for
    the local user (None), those its token's patterns cover for an HTTP caller."""
    return access.readable_projects(caller, list(projects))


def wants_all(project: Any) -> bool:
    if isinstance(project, str):
        return project.strip() == ALL
    if isinstance(project, list | tuple):
        return any(isinstance(p, str) and p.strip() == ALL for p in project)
    return False


async def resolve_projects(
    engine: Engine,
    project: Any,
    current_project: Any = None,
    *,
    readable: Callable[[list[str]], list[str]] = readable_projects,
) -> tuple[Any, Any]:
    """(project, current_project) as the engine takes them: ``"*"`` (alone, or as a one-element
    list) becomes the readable projects, and the current project defaults to the default project
    when it is one of them, else the first; anything else is passed on as given."""
    if not wants_all(project):
        return project, current_project
    if isinstance(project, list | tuple) and len(project) > 1:
        raise InvalidInput("'*' already means every project: give it alone, not in a list")
    names = readable(await engine.project_names())
    if not names:
        raise InvalidInput("project '*': there is no project you may read")
    if current_project is None:
        default = engine.config.default_project
        current_project = default if default in names else names[0]
    return names, current_project
