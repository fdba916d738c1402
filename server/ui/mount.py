"""The browser inside ``memlane serve --transport http`` (``[ui] enabled = true``), at ``/ui``.

It shares the MCP server's engine (``State``), so one process opens the database once, and the
stats page sees the MCP clients' recalls too.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import RedirectResponse
from starlette.routing import Mount, Route

from memlane.server.ui.app import create_app


def mount_ui(app: Starlette, state, guard=None) -> None:
    """Add ``/ui`` (the browser) to the MCP HTTP app; ``state.ready()`` waits for the start-up.
    ``guard`` wraps the browser's app (``serve`` lets only an all-projects caller through)."""
    ui = create_app(state.ready)
    app.router.routes.append(Route("/ui", lambda request: RedirectResponse("/ui/", status_code=308)))
    app.router.routes.append(Mount("/ui", app=guard(ui) if guard is not None else ui))
