"""Who may read and write which projects: the one place that decides.

A ``Principal`` is a caller (an HTTP bearer token's name, or the local user) with the glob
patterns (``fnmatch``, case-sensitive) of the projects it may read and write. stdio and the CLI are
the local user, ``LOCAL``, with every project. The server maps each request's access token to a
principal (``memlane.server.auth.http``); the engine takes it on every call that names a project or a
memory id and checks it here, so a caller learns nothing about projects outside its patterns.

Pure logic, no ``mcp``: recall across several projects asks ``readable_projects`` which of the
store's projects the caller may see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from memlane.pipeline.errors import NotAllowed

ALL = "*"


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    projects: tuple[str, ...]  # fnmatch patterns; ("*",) is every project

    @property
    def everything(self) -> bool:
        """Whether this principal may use every project (the local user, an all-projects token)."""
        return ALL in self.projects


LOCAL = Principal("local", (ALL,))


def allowed(principal: Principal | None, project: str) -> bool:
    """Whether ``principal`` may read and write ``project``; ``None`` is the local user. The
    project name is matched against each pattern, so a literal ``"*"`` project (or a request for
    "every project") is allowed only to a principal whose patterns include ``*``."""
    if principal is None:
        return True
    return any(fnmatchcase(project, pattern) for pattern in principal.projects)


def readable_projects(principal: Principal | None, all_projects: Iterable[str]) -> list[str]:
    """The projects of ``all_projects`` that ``principal`` may read, sorted."""
    return sorted({p for p in all_projects if allowed(principal, p)})


def check(principal: Principal | None, project: str) -> None:
    """Raise ``NotAllowed`` unless ``principal`` may use ``project``. The message is the same
    whether or not the project exists."""
    if principal is not None and not allowed(principal, project):  # None: the local user, allowed all
        raise NotAllowed(
            f"the token {principal.name!r} may not use project {project!r}; it covers projects "
            f"matching {', '.join(principal.projects)}. Pass one of those as project, or ask for a "
            "token that covers it (memlane token create --projects ...)"
        )
