"""``project="*"`` in a recall, for the MCP tool and the CLI: the argument names every project the
caller may read (``pipeline/access.py`` decides which those are).
"""

from __future__ import annotations

from typing import Any

from memlane.pipeline import access
from memlane.pipeline.access import ALL, Principal
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput


def wants_all(project: Any) -> bool:
    if isinstance(project, str):
        return project.strip() == ALL
    if isinstance(project, list | tuple):
        return any(isinstance(p, str) and p.strip() == ALL for p in project)
    return False


async def resolve_projects(
    engine: Engine, project: Any, current_project: Any = None, *, principal: Principal | None = None
) -> tuple[Any, Any]:
    """(project, current_project) as the engine takes them: ``"*"`` (alone, or as a one-element
    list) becomes the projects ``principal`` may read (None: the local user, every project), and
    the current project defaults to the default project when it is one of them, else the first;
    anything else is passed on as given. Only a principal that covers every project may ask for
    ``"*"``."""
    if not wants_all(project):
        return project, current_project
    access.check(principal, ALL)
    if isinstance(project, list | tuple) and len(project) > 1:
        raise InvalidInput("'*' already means every project: give it alone, not in a list")
    names = access.readable_projects(principal, await engine.project_names())
    if not names:
        raise InvalidInput("project '*': there is no project you may read")
    if current_project is None:
        default = engine.config.default_project
        current_project = default if default in names else names[0]
    return names, current_project
