"""What every tool call shares: the process's one engine and its start-up (``State``), who is
calling (``State.caller``) and the turn of memlane's errors into tool errors (``State.call``).

The lifespan yields the ``State``; tools reach it through ``state_of(ctx)``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, cast

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

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
from memlane.pipeline.store import replicas
from memlane.server.auth.http import HttpAuth, principal_of
from memlane.server.settings import Settings

if TYPE_CHECKING:
    from memlane.server.metrics import Metrics

log = logging.getLogger("memlane.server")

READY_TIMEOUT = 3.0  # seconds /readyz waits for the database; probes time out at 1-10 s


class State:
    """Process-wide: one engine for every session (SSE runs the lifespan once per connection).
    ``auth``: the HTTP transports' access control; without it every call is the local user's."""

    def __init__(
        self,
        settings: Settings,
        engine: Engine | None = None,
        auth: HttpAuth | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.engine = engine or Engine(settings.engine())
        self.auth = auth
        self.metrics = metrics
        self._startup: asyncio.Task | None = None
        if auth is not None:  # the rate limit's buckets are the database's once the store is open
            auth.limiter.shared = self.opened_store

    def start(self) -> asyncio.Task:
        """The start-up's task, begun on the first call."""
        if self._startup is None:
            if self.metrics is not None:
                self.metrics.attach(self)
            self._startup = self._open()
            self.engine.runtime.warm_in_background().add_done_callback(_log_warm_failure)
        return self._startup

    def _open(self) -> asyncio.Task:
        """The start-up's task, which logs when the store is open (a failure: the first call says
        why)."""
        task = asyncio.get_running_loop().create_task(self.engine.open())
        task.add_done_callback(self._log_open)
        return task

    def _log_open(self, task: asyncio.Task) -> None:
        if not _failed(task):
            log.info("store open (schema version %d)", self.engine.store.schema_version)

    def opened_store(self):
        """The engine's store when start-up has opened it, else None (never waits for it)."""
        task = self._startup
        if task is None or not task.done() or _failed(task):
            return None
        return self.engine.store

    async def ready(self) -> Engine:
        task = self.start()
        if task.done() and _failed(task):
            # A start-up that failed before this call (the database could not start, was not
            # reachable yet) is tried again rather than its old error repeated for the life of the
            # process. Concurrent calls share the new attempt.
            log.info("retrying the start-up that failed earlier")
            task = self._startup = self._open()
        try:
            await asyncio.shield(task)
        except MemlaneError as e:
            raise ToolError(f"memlane could not start its database: {e}") from None
        except Exception as e:
            log.exception("start-up failed")
            raise ToolError(f"memlane could not start: {type(e).__name__}: {e}") from None
        return self.engine

    async def not_ready(self, timeout: float = READY_TIMEOUT) -> str | None:
        """Why this server cannot serve a tool call now, in words that name no path, address or
        error text (``/readyz`` shows them to anyone); None when it can: the start-up has opened
        the store (migrations applied), the embedding model is loaded and the database answers."""
        task = self.start()
        if not task.done():
            return "starting: the database is being opened and migrated"
        if _failed(task):
            # Retried here as a tool call would: a balancer sends no call to a server it finds not
            # ready, so nothing else would ever retry a start-up that failed.
            self._startup = self._open()
            return "the database could not be opened (retrying)"
        model = self.engine.runtime.model_state()
        if model != "loaded":
            return f"the embedding model is {'loading' if model == 'loading' else 'not loaded (failed)'}"
        if not await self.engine.store.reachable(timeout):
            return "the database is unreachable"
        return None

    async def close(self) -> None:
        task = self._startup
        if task is not None and not task.done():
            task.cancel()
        if task is not None:
            # Wait for the cancelled start-up to unwind: Engine.open closes a half-opened store on
            # cancellation, and closing the engine before that would leave its pool connected.
            # (asyncio.wait: the start-up's own error is not this method's to raise.)
            await asyncio.wait({task})
        if self.metrics is not None:
            self.metrics.detach()
        await self.engine.close()

    def caller(self) -> Principal | None:
        """Who is calling: None (the local user, every project) over stdio; over HTTP the principal
        of the request's bearer token (the SDK's auth context), refusing a call that has none."""
        if self.auth is None:
            return None
        token = get_access_token()
        if token is None:  # cannot happen behind the SDK's bearer middleware; fail closed if it does
            raise ToolError("not allowed: this call carries no valid bearer token")
        return principal_of(token)

    def caller_key(self, ctx: Context | None) -> str:
        """Who is calling, for read-your-writes on read replicas (``replicas.CALLER``): the HTTP
        token's name when auth is on, else the MCP session, else the one local client."""
        if self.auth is not None and (token := get_access_token()) is not None:
            return f"token:{principal_of(token).name}"
        session = None
        if ctx is not None:
            with contextlib.suppress(Exception):  # outside a request; stdio has no headers
                session = (ctx.headers or {}).get("mcp-session-id")
        return f"session:{session}" if session else replicas.LOCAL_CALLER

    @asynccontextmanager
    async def call(self, ctx: Context | None = None) -> AsyncIterator[Engine]:
        """``async with state.call(ctx) as engine``: the opened engine, and every error of the call
        as a tool error that says what failed. ``ctx`` names the caller (``caller_key``)."""
        eng = await self.ready()
        caller = replicas.CALLER.set(self.caller_key(ctx))
        try:
            yield eng
        except MemlaneError as e:
            raise tool_error(e) from None
        except ToolError:
            raise
        except Exception as e:
            # Anything else is a bug or an outage; the SDK would show the agent only "Error
            # executing tool". Say what failed, keep the traceback in the server log.
            log.exception("tool call failed")
            raise ToolError(
                f"memlane failed unexpectedly ({type(e).__name__}: {e}); the server log has details"
            ) from None
        finally:
            replicas.CALLER.reset(caller)


def _failed(task: asyncio.Task) -> bool:
    """A done start-up that did not open the store (cancelled, or raised)."""
    return task.cancelled() or task.exception() is not None


def _log_warm_failure(warming) -> None:
    if warming.exception() is not None:  # the first tool call will hit the same error and report it
        log.error("loading the embedding model failed: %s", warming.exception())


def state_of(ctx: Context) -> State:
    """The ``State`` the server's lifespan yielded, from a tool's or a resource template's context."""
    # The lifespan (app.py) yields a State; the SDK's Context types it as its default, a dict.
    return cast(State, ctx.request_context.lifespan_context)


def tool_error(e: MemlaneError) -> ToolError:
    if isinstance(e, InvalidInput):
        err = ToolError(f"invalid input: {e}")
    elif isinstance(e, NotAllowed):
        err = ToolError(f"not allowed: {e}")
    elif isinstance(e, NotFound):
        err = ToolError(f"{e}; recall returns the ids of existing memories")
    elif isinstance(e, DatabaseUnavailable):
        err = ToolError(f"database unavailable: {e}")
    elif isinstance(e, StoreError):
        err = ToolError(f"memlane's database failed: {e}")
    else:
        err = ToolError(str(e))
    err.outcome = _outcome(e)  # type: ignore[attr-defined]  # our mark on the SDK's class; outcome_of reads it
    return err


def _outcome(e: MemlaneError) -> str:
    """The caller's doing (invalid input, a memory that does not exist), a refusal (a project the
    caller may not use), or memlane's failure."""
    if isinstance(e, InvalidInput | NotFound):
        return "invalid_input"
    if isinstance(e, NotAllowed):
        return "refused"
    return "error"


def outcome_of(e: BaseException) -> str:
    """A failed tool call's outcome for the metrics: invalid_input, refused or error. The SDK wraps
    a tool's ToolError in one of its own; the cause says which it was."""
    cause: BaseException | None = e
    while cause is not None:
        outcome = getattr(cause, "outcome", None)
        if outcome is not None:
            return str(outcome)
        if isinstance(cause, ValidationError):
            return "invalid_input"  # the SDK checked the arguments before the tool ran
        if isinstance(cause, ToolError) and str(cause).startswith(("Unknown tool", "not allowed")):
            return "invalid_input" if str(cause).startswith("Unknown") else "refused"
        cause = cause.__cause__
    return "error"
