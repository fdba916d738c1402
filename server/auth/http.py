"""Access control on the HTTP transports, through the MCP SDK's resource-server hooks.

- ``TokenVerifier`` (the SDK's protocol) checks a bearer token against ``TokenStore`` and answers
  an ``AccessToken`` whose ``client_id`` is the principal's name and whose ``claims`` carry its
  project patterns (``memlane_projects``). An OAuth 2.1 authorization server can replace it later:
  any verifier whose access tokens carry that claim works unchanged (``principal_of``).
- The SDK's ``AuthSettings`` make the transports wrap ``/mcp`` and ``/sse`` + ``/messages/`` in
  its bearer middleware (401 with ``WWW-Authenticate: Bearer ... resource_metadata=...``) and
  serve the RFC 9728 protected resource metadata.
- ``LocalOrBearer`` replaces the SDK's authentication backend so that a server bound to the
  loopback with no token configured keeps working without one (as the local user, every
  project); the moment a token exists, every request needs one. A server bound elsewhere never
  lets a request through without a token.
- ``RateLimit``: a token bucket per token principal, in the database once the store is open (every
  server on it shares one per token), 429 with ``Retry-After``.
- ``transport_security``: the SDK's Host/Origin checks (DNS rebinding) on both transports, for
  every bind address, not only the loopback.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import psycopg
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, BaseUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from memlane.pipeline.access import ALL, LOCAL, Principal
from memlane.pipeline.config import data_dir_of
from memlane.pipeline.errors import MemlaneError
from memlane.server.auth.token_store import TokenStore, env_records
from memlane.server.settings import Settings

if TYPE_CHECKING:
    from memlane.pipeline.store import Store

log = logging.getLogger("memlane.auth")

PROJECTS_CLAIM = "memlane_projects"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def tokens_path(settings: Settings) -> Path:
    if settings.auth.tokens_file is not None:
        return Path(settings.auth.tokens_file).expanduser()
    return data_dir_of(settings.data_dir) / "tokens.json"


def token_store(settings: Settings) -> TokenStore:
    raw = settings.auth.tokens.get_secret_value() if settings.auth.tokens is not None else None
    return TokenStore(tokens_path(settings), env_records(raw))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def principal_of(token: AccessToken) -> Principal:
    """The principal an SDK access token stands for: its client id and the project patterns in its
    ``memlane_projects`` claim (none: no project at all, so a token from elsewhere that lacks the
    claim can do nothing)."""
    patterns = (token.claims or {}).get(PROJECTS_CLAIM) or []
    return Principal(token.client_id, tuple(p for p in patterns if isinstance(p, str)))


def _access_token(token: str, principal: Principal) -> AccessToken:
    return AccessToken(
        token=token, client_id=principal.name, scopes=[], claims={PROJECTS_CLAIM: list(principal.projects)}
    )


class TokenVerifier:
    """The SDK's ``TokenVerifier`` protocol over memlane's token store."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store

    async def verify_token(self, token: str) -> AccessToken | None:
        record = self.store.verify(token)
        if record is None:
            return None
        return _access_token(token, record.principal)


class LocalOrBearer(BearerAuthBackend):
    """The SDK's bearer backend, except that a request with no Authorization header on a loopback
    server with no token configured is the local user (every project)."""

    def __init__(self, verifier: TokenVerifier, *, open_when_no_tokens: bool) -> None:
        super().__init__(verifier)
        self.store = verifier.store
        self.open_when_no_tokens = open_when_no_tokens

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser] | None:
        if self.open_when_no_tokens and "authorization" not in conn.headers and not self.store.configured():
            return AuthCredentials([]), AuthenticatedUser(_access_token("", LOCAL))
        # The SDK's backend leaves its result untyped; Starlette's contract is this.
        bearer: tuple[AuthCredentials, BaseUser] | None = await super().authenticate(conn)
        return bearer


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """A token bucket per principal: ``burst`` requests at once, refilled at ``per_minute``.

    ``shared`` gives the process's store once it is open (``State``): the buckets are then the
    database's (``store/limits.py``), one per token for every server on the database, so N servers
    behind a balancer allow a token the configured rate, not N times it. Before the store is open
    (start-up answers ``initialize`` at once) and while the database is unreachable, the process's
    own buckets apply: a request is never held back waiting for the database."""

    per_minute: float
    burst: int
    clock: Any = time.monotonic
    shared: Callable[[], Store | None] | None = None
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _warned_at: float = -math.inf

    async def acquire(self, key: str) -> float:
        """0 when the request may go ahead, else the seconds until it could: the database's bucket
        when there is one to use, else this process's (``take``)."""
        if self.per_minute <= 0:
            return 0.0
        store = self.shared() if self.shared is not None else None
        if store is not None and store.serving:
            try:
                return await store.take_rate_token(key, self.per_minute, self.burst)
            except (MemlaneError, psycopg.Error) as e:
                now = self.clock()
                if now - self._warned_at >= 60:  # once a minute, not once a request
                    self._warned_at = now
                    log.warning("rate limit: the database's buckets failed (%s); this process's apply", e)
        return self.take(key)

    def take(self, key: str) -> float:
        """This process's bucket: 0 when the request may go ahead, else the seconds until it could."""
        if self.per_minute <= 0:
            return 0.0
        rate = self.per_minute / 60.0
        now = self.clock()
        with self._lock:
            b = self._buckets.get(key)
            if b is None:
                b = self._buckets[key] = _Bucket(float(self.burst), now)
            b.tokens = min(float(self.burst), b.tokens + (now - b.at) * rate)
            b.at = now
            if b.tokens >= 1.0:
                b.tokens -= 1.0
                return 0.0
            return (1.0 - b.tokens) / rate


class RateLimit:
    """ASGI middleware after authentication: each token's requests go through its bucket; the
    local user (no token) is not limited."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if scope["type"] == "http" and isinstance(user, AuthenticatedUser) and user.access_token.token:
            wait = await self.limiter.acquire(user.access_token.client_id)
            if wait > 0:
                seconds = max(1, math.ceil(wait))
                body = json.dumps(
                    {
                        "error": "rate_limited",
                        "error_description": f"too many requests for token {user.access_token.client_id!r} "
                        f"(auth.rate_limit_per_minute = {self.limiter.per_minute:g}); retry after {seconds} s",
                    }
                ).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 429,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"retry-after", str(seconds).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class RequireAllProjects:
    """Guards what shows every project (the memory browser, /metrics) in the HTTP server: it
    answers only the local user (no token configured, loopback) or a token whose projects are ``*``."""

    def __init__(
        self, app: ASGIApp, resource_metadata_url: str | None, what: str = "the memory browser shows"
    ) -> None:
        self.app = app
        self.resource_metadata_url = resource_metadata_url
        self.what = what

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if scope["type"] == "http":
            if not isinstance(user, AuthenticatedUser):
                return await _error(
                    send, 401, "invalid_token", "Authentication required", self.resource_metadata_url
                )
            if ALL not in principal_of(user.access_token).projects:
                return await _error(
                    send,
                    403,
                    "insufficient_scope",
                    f"{self.what} every project: it needs a token created with --projects '*'",
                    None,
                )
        await self.app(scope, receive, send)


async def _error(send: Send, status: int, error: str, description: str, metadata_url: str | None) -> None:
    parts = [f'error="{error}"', f'error_description="{description}"']
    if metadata_url:
        parts.append(f'resource_metadata="{metadata_url}"')
    body = json.dumps({"error": error, "error_description": description}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", f"Bearer {', '.join(parts)}".encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# -- wiring -------------------------------------------------------------------------------------------


def _bracket(name: str) -> str:
    """A host as it appears in a Host header or URL (IPv6 addresses in brackets)."""
    name = name.strip("[]")
    return f"[{name}]" if ":" in name else name


def transport_security(settings: Settings, host: str) -> TransportSecuritySettings:
    """Host and Origin validation for both transports: loopback names, the bind address (unless a
    wildcard), auth.public_url's host and server.allowed_hosts; origins of those hosts plus
    server.allowed_origins."""
    names: list[str] = list(LOOPBACK_HOSTS)
    if host not in ("0.0.0.0", "::", ""):
        names.append(host)
    if settings.auth.public_url and (pu := urlsplit(settings.auth.public_url).hostname):
        names.append(pu)
    hosts: list[str] = []
    origins: list[str] = []
    for n in dict.fromkeys(_bracket(n) for n in names):
        hosts.extend([n, f"{n}:*"])
        for scheme in ("http", "https"):
            origins.extend([f"{scheme}://{n}", f"{scheme}://{n}:*"])
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[*hosts, *settings.server.allowed_hosts],
        allowed_origins=[*origins, *settings.server.allowed_origins],
    )


@dataclass
class HttpAuth:
    """Everything the HTTP transports need for access control, built once by ``serve``."""

    store: TokenStore
    verifier: TokenVerifier
    settings: AuthSettings
    open_when_no_tokens: bool
    limiter: RateLimiter

    @property
    def resource_metadata_url(self) -> str:
        url = self.settings.resource_server_url
        assert url is not None  # http_auth always sets it
        return str(build_resource_metadata_url(url))

    def install(self, app: Starlette) -> None:
        """Put memlane's backend in place of the SDK's (same middleware, same position) and the rate
        limit right after it, before the app builds its middleware stack."""
        for i, m in enumerate(app.user_middleware):
            # Starlette types `cls` as a middleware factory protocol, which the class is not
            # statically; at run time it is the class the SDK registered.
            cls: object = m.cls
            if cls is AuthenticationMiddleware:
                app.user_middleware[i] = Middleware(
                    AuthenticationMiddleware,
                    backend=LocalOrBearer(self.verifier, open_when_no_tokens=self.open_when_no_tokens),
                )
                break
        else:  # the SDK changed how it wires auth: refuse to run unprotected
            raise RuntimeError("the MCP SDK app has no AuthenticationMiddleware to configure")
        app.user_middleware.append(Middleware(RateLimit, limiter=self.limiter))


def refusal(settings: Settings, host: str, store: TokenStore) -> str | None:
    """Why ``memlane serve`` must not start on ``host`` (an address other than the loopback with no
    token configured), or None."""
    if is_loopback(host) or store.configured():
        return None
    return (
        f"refusing to serve on {host} without authentication: anyone who can reach that address could "
        "read and change every memory. Create a token first, e.g.\n"
        f"    memlane token create --projects 'acme*' --name alice\n"
        f"(stored as a hash in {store.path}; set [auth] tokens_file to keep it elsewhere, or pass tokens "
        "in MEMLANE_AUTH__TOKENS), then send it as 'Authorization: Bearer <token>'. "
        "Or serve on 127.0.0.1 (the default)."
    )


def http_auth(settings: Settings, *, host: str, port: int, path: str, store: TokenStore) -> HttpAuth:
    display = "127.0.0.1" if host in ("0.0.0.0", "::") else _bracket(host)
    public = (settings.auth.public_url or f"http://{display}:{port}").rstrip("/")
    issuer = (settings.auth.issuer_url or public).rstrip("/")
    auth_settings = AuthSettings(
        issuer_url=issuer,
        resource_server_url=f"{public}{path}",
        # memlane's own tokens are not issued for a resource (no audience to check)
        validate_token_resource=False,
    )
    return HttpAuth(
        store=store,
        verifier=TokenVerifier(store),
        settings=auth_settings,
        open_when_no_tokens=is_loopback(host),
        limiter=RateLimiter(settings.auth.rate_limit_per_minute, settings.auth.rate_limit_burst),
    )
