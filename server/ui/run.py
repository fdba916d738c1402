"""``memlane ui``: the memory browser alone, on the loopback interface.

It has no login yet (an authentication issue is open), so it refuses any address other than the
loopback: anyone who can reach the port could read and delete every memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys

from memlane.pipeline.engine import Engine
from memlane.server.auth.http import is_loopback
from memlane.server.settings import Settings

log = logging.getLogger("memlane.ui")


def refusal(host: str) -> str | None:
    """Why the browser must not be served on ``host``, or None when it may."""
    if is_loopback(host):
        return None
    return (
        f"refusing to serve the memory browser on {host}: it has no login yet, so anyone who can "
        "reach that address could read and delete every memory. Use 127.0.0.1 (the default) and, "
        "from another machine, an SSH tunnel (ssh -L 8766:127.0.0.1:8766 host)."
    )


def build(settings: Settings, engine: Engine | None = None):
    """The browser app with its own engine, opened by the app's lifespan."""
    from memlane.server.ui.app import create_app

    engine = engine or Engine(settings.engine())
    ready: asyncio.Future | None = None

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        nonlocal ready
        ready = asyncio.get_running_loop().create_future()
        try:
            await engine.open()
            await asyncio.to_thread(engine.runtime.warm)  # the model loads now, not on the first search
            ready.set_result(engine)
            yield
        finally:
            await engine.close()

    async def get_engine() -> Engine:
        if ready is None:
            raise RuntimeError("the memory browser has not started")
        return await asyncio.shield(ready)

    return create_app(get_engine, lifespan=lifespan)


def run(settings: Settings, *, host: str | None = None, port: int | None = None) -> int:
    host = host or "127.0.0.1"
    port = port or settings.ui.port
    why = refusal(host)
    if why:
        print(f"memlane ui: {why}", file=sys.stderr)
        return 2
    import uvicorn

    app = build(settings)
    print(f"memlane ui: the memory browser is on http://{host}:{port}/", file=sys.stderr)
    # Access logs off: uvicorn writes them to stdout, and URLs carry search questions.
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, log_config=None)
    uvicorn.Server(config).run()
    return 0
