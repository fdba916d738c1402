"""CSRF protection and response headers of the memory browser.

CSRF: the signed double-submit cookie pattern (OWASP). Every page sets a random cookie
(``memlane_csrf``, HttpOnly, SameSite=Strict) once; every form carries
``HMAC(process secret, cookie)``. A POST is accepted only when its form token is the HMAC of the
cookie it came with: another site can make a browser send the cookie, but cannot read it or the
page, so it cannot compute the token. The secret is per process, so a restart invalidates open
forms (the error page says to reload). An Origin header, when the browser sends one, must also
name this host.

Headers: a Content-Security-Policy without any script (the pages need none) and with
frame-ancestors 'none', nosniff, no referrer, and no caching of pages that show memories.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "memlane_csrf"
FIELD = "csrf_token"

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; script-src 'none'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class Csrf:
    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token_for(self, cookie: str) -> str:
        return hmac.new(self._secret, cookie.encode(), hashlib.sha256).hexdigest()

    @staticmethod
    def new_cookie() -> str:
        return secrets.token_urlsafe(32)

    def check(self, request: Request, form_token: object) -> str | None:
        """Why this state-changing request is refused, or None when it may proceed."""
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
            return "the form was sent from another site"
        cookie = request.cookies.get(COOKIE)
        if not cookie:
            return "the form's security cookie is missing (are cookies blocked?)"
        if not isinstance(form_token, str) or not hmac.compare_digest(form_token, self.token_for(cookie)):
            return "the form's security token is missing or out of date"
        return None


class SecurityHeaders:
    """Pure ASGI middleware adding HEADERS to every HTTP response (errors included)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                headers.extend((k, v) for k, v in HEADERS if k not in present)
                if b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)
