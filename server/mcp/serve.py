"""``memlane serve``: stdio, streamable HTTP (``/mcp``) or SSE (``/sse``).

Over HTTP and SSE: bearer tokens (server/auth/http.py), Host/Origin checks on every bind address, a
request body limit and a per-token rate limit. Serving on an address other than the loopback with
no token configured is refused.
"""

from __future__ import annotations

import logging

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from memlane.pipeline.engine import Engine
from memlane.server import aio, tracing
from memlane.server.auth.http import (
    HttpAuth,
    RequireAllProjects,
    http_auth,
    refusal,
    token_store,
    transport_security,
)
from memlane.server.mcp import health, stdio_front
from memlane.server.mcp.app import TOOLS, build_server
from memlane.server.mcp.state import State
from memlane.server.settings import Settings
from memlane.server.ui import run as ui_run

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # Prometheus's text format

log = logging.getLogger("memlane.server")


def http_app(
    settings: Settings, server: MCPServer, state: State, auth: HttpAuth, *, transport: str, host: str
) -> Starlette:
    """The HTTP or SSE transport's app: the MCP endpoint behind auth, the health probes, and the
    memory browser when it is enabled (HTTP only)."""
    security = transport_security(settings, host)
    limit = settings.server.max_request_body_bytes
    app = (
        server.streamable_http_app(host=host, transport_security=security, max_request_body_size=limit)
        if transport == "http"
        else server.sse_app(host=host, transport_security=security, max_request_body_size=limit)
    )
    auth.install(app)
    health.install(app, state)
    if state.metrics is not None:
        metrics = state.metrics

        async def scrape(scope: Scope, receive: Receive, send: Send) -> None:
            await metrics.refresh()
            await Response(metrics.exposition(), media_type=CONTENT_TYPE)(scope, receive, send)

        guarded = RequireAllProjects(scrape, auth.resource_metadata_url, what="/metrics counts")
        app.router.routes.append(Route("/metrics", guarded, methods=["GET"]))
    if settings.ui.enabled and transport == "http":
        from memlane.server.ui.mount import mount_ui  # the web stack, only with [ui] enabled

        mount_ui(app, state, guard=lambda ui: RequireAllProjects(ui, auth.resource_metadata_url))
    return app


def serve(
    settings: Settings,
    *,
    transport: str | None = None,
    host: str | None = None,
    port: int | None = None,
    engine: Engine | None = None,
) -> int:
    transport = transport or settings.server.transport
    host = host or settings.server.host
    port = port or settings.server.port
    if settings.ui.enabled and transport == "http":
        if why := ui_run.refusal(host):
            log.error("memlane serve: %s Set [ui] enabled = false to serve MCP on %s.", why, host)
            return 2
    if settings.ui.enabled and transport != "http":
        log.warning("[ui] enabled: the memory browser is served with --transport http only (or: memlane ui)")
    auth = None
    if transport != "stdio":
        store = token_store(settings)
        if why := refusal(settings, host, store):
            log.error("memlane serve: %s", why)
            return 2
        path = "/mcp" if transport == "http" else "/sse"
        auth = http_auth(settings, host=host, port=port, path=path, store=store)
        if store.configured():
            log.info("bearer tokens required (%s)", store.path)
        else:
            log.info("no token configured: loopback requests need none until `memlane token create`")
    metrics = None
    if transport != "stdio" or settings.telemetry.metrics_port:
        from memlane.server.metrics import Metrics  # prometheus-client: only when metrics are served

        metrics = Metrics(settings.telemetry, tools=[fn.__name__ for fn, _ in TOOLS])
    server, state = build_server(settings, engine=engine, auth=auth, metrics=metrics)
    tracing.configure()  # only with OTEL_EXPORTER_OTLP_ENDPOINT set; nothing imported otherwise

    async def run() -> None:
        # Start the database and the model now, not when the first client connects (the SSE app
        # runs the lifespan per connection).
        state.start()
        listener = None
        try:
            if transport == "stdio" and metrics is not None and settings.telemetry.metrics_port:
                from memlane.server.metrics import Listener

                listener = Listener(metrics, settings.telemetry.metrics_port)
            if transport == "stdio":
                front = stdio_front.active()
                if front is None:
                    await server.run_stdio_async()
                else:  # the wire is the front's: the SDK reads and writes through it
                    stdin, stdout = front.sdk_streams()
                    async with stdio_server(anyio.wrap_file(stdin), anyio.wrap_file(stdout)) as (read, write):
                        # (MCPServer.run_stdio_async with these streams; it takes none)
                        low = server._lowlevel_server
                        await low.run(read, write, low.create_initialization_options())
            else:
                assert auth is not None
                app = http_app(settings, server, state, auth, transport=transport, host=host)
                path = "/mcp" if transport == "http" else "/sse"
                if settings.ui.enabled and transport == "http":
                    log.info("memlane memory browser on http://%s:%d/ui/", host, port)
                log.info("memlane serving %s on http://%s:%d%s", transport, host, port, path)
                import uvicorn  # here: HTTP only, ~0.1 s to import

                # Our own uvicorn so access logs (which uvicorn writes to stdout) stay off, and its
                # other lines go through memlane's handler (text or JSON) instead of its own.
                config = uvicorn.Config(
                    app, host=host, port=port, log_level="warning", access_log=False, log_config=None
                )
                await uvicorn.Server(config).serve()
        finally:
            if listener is not None:
                listener.close()
            with anyio.CancelScope(shield=True):
                await state.close()

    anyio.run(run, backend_options={"loop_factory": aio.loop_factory()})
    return 0
