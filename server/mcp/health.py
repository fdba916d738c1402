"""``/healthz`` and ``/readyz`` on the HTTP transports, for load balancers and orchestrators.

``/healthz``: the process answers HTTP (a liveness probe: restart it when this fails).
``/readyz``: it can serve a tool call now (a readiness probe: send it traffic only then): the
database is reachable, the migrations are applied, the embedding model is loaded; otherwise 503 and
the reason (``State.not_ready``). Both are unauthenticated, as probes are, so they say nothing
else: no version, no path, no address, no error text.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memlane.server.mcp.state import State

_NO_STORE = {"cache-control": "no-store"}


def install(app: Starlette, state: State) -> None:
    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"}, headers=_NO_STORE)

    async def readyz(request: Request) -> JSONResponse:
        reason = await state.not_ready()
        if reason is None:
            return JSONResponse({"status": "ready"}, headers=_NO_STORE)
        return JSONResponse({"status": "not ready", "reason": reason}, status_code=503, headers=_NO_STORE)

    app.router.routes.append(Route("/healthz", healthz, methods=["GET", "HEAD"]))
    app.router.routes.append(Route("/readyz", readyz, methods=["GET", "HEAD"]))
