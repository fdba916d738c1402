"""Bearer tokens for the HTTP transports: created by ``memlane token create``, kept as hashes.

A token is ``mlt_`` and 43 URL-safe characters (256 random bits). Only its SHA-256 is stored, in
a JSON file (``[auth] tokens_file``, default ``tokens.json`` in the data directory) written
atomically with mode 0600, next to the name of its principal, the project patterns it may read
and write, and when it was created. Tokens can also come from the environment
(``MEMLANE_AUTH__TOKENS``, see ``env_records``). Checking a token hashes it and compares the hash
with every stored one with ``hmac.compare_digest``.

A running server re-reads the file when its modification time, size or inode changes (one
``stat`` per request), so tokens created or revoked while it runs take effect on the next request.
A file that cannot be read or parsed fails closed: no token is valid until it is fixed.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlane.pipeline.access import Principal
from memlane.pipeline.errors import ConfigError, InvalidInput

log = logging.getLogger("memlane.auth")

PREFIX = "mlt_"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_HEX_RE = re.compile(r"^[0-9a-f]{64}$")


def digest(token: str) -> str:
    """The stored form of a token: its SHA-256, hex (a token has 256 random bits, so no salt or
    slow hash is needed)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class TokenRecord:
    name: str
    sha256: str
    projects: tuple[str, ...]
    created: str | None = None
    source: str = "file"  # "file" or "env"

    @property
    def principal(self) -> Principal:
        return Principal(self.name, self.projects)

    def listing(self) -> dict[str, Any]:
        """What ``memlane token list`` shows: never the token, only a prefix of its hash."""
        return {
            "name": self.name,
            "projects": list(self.projects),
            "created": self.created,
            "sha256_prefix": self.sha256[:12],
            "source": self.source,
        }


def check_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInput(
            f"token name {name!r}: use 1-64 letters, digits, '_', '.', '@' or '-', starting with a letter or digit"
        )
    return name


def check_projects(patterns: Any) -> tuple[str, ...]:
    """Project patterns (fnmatch globs: ``acme``, ``acme*``, ``*``), at least one."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, list | tuple):
        raise InvalidInput("projects must be a list of project names or glob patterns")
    out: list[str] = []
    for p in patterns:
        for part in p.split(",") if isinstance(p, str) else [p]:
            if not isinstance(part, str) or not part.strip() or len(part.strip()) > 200:
                raise InvalidInput(
                    "each project pattern must be a non-empty name or glob of at most 200 characters "
                    "(e.g. acme, 'acme*', '*')"
                )
            if any(ord(c) < 32 for c in part):
                raise InvalidInput("project patterns cannot hold control characters")
            if part.strip() not in out:
                out.append(part.strip())
    if not out:
        raise InvalidInput("give at least one project pattern: --projects 'acme*' (or '*' for every project)")
    return tuple(out)


def _record(obj: Any, source: str) -> TokenRecord:
    if not isinstance(obj, dict):
        raise ValueError("each token must be a JSON object")
    unknown = set(obj) - {"name", "sha256", "token", "projects", "created"}
    if unknown:
        raise ValueError(f"unknown token field(s) {', '.join(sorted(unknown))}")
    name = check_name(obj.get("name"))
    if "token" in obj and "sha256" in obj:
        raise ValueError(f"token {name!r}: give token or sha256, not both")
    if "token" in obj:
        if not isinstance(obj["token"], str) or len(obj["token"]) < 32:
            raise ValueError(f"token {name!r}: a token must be a string of at least 32 characters")
        sha = digest(obj["token"])
    else:
        given = obj.get("sha256")
        if not isinstance(given, str) or not _HEX_RE.match(given):
            raise ValueError(f"token {name!r}: sha256 must be 64 lowercase hex digits")
        sha = given
    created = obj.get("created")
    return TokenRecord(
        name, sha, check_projects(obj.get("projects")), created if isinstance(created, str) else None, source
    )


def env_records(raw: str | None) -> list[TokenRecord]:
    """Tokens from ``MEMLANE_AUTH__TOKENS``: a JSON list of ``{"name", "projects", "token"}`` (or
    ``"sha256"`` instead of ``"token"``). Plain tokens are hashed here and not kept."""
    if not raw:
        return []
    try:
        data = json.loads(raw)
        if not isinstance(data, list):
            raise ValueError("a JSON list of token objects")
        records = [_record(o, "env") for o in data]
    except (ValueError, InvalidInput) as e:
        # Never echo the value: it holds tokens.
        raise ConfigError(
            f"MEMLANE_AUTH__TOKENS is not valid: {e if not isinstance(e, json.JSONDecodeError) else 'not JSON'}; "
            'expected e.g. [{"name": "ci", "projects": ["acme*"], "token": "..."}]'
        ) from None
    _unique(records)
    return records


def _unique(records: list[TokenRecord]) -> None:
    names = [r.name for r in records]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"token names must be unique; repeated: {', '.join(dupes)}")


class TokenStore:
    """The tokens a server accepts: the file's (re-read when it changes) plus the environment's."""

    def __init__(self, path: Path, env: list[TokenRecord] | None = None) -> None:
        self.path = Path(path)
        self.env = list(env or [])
        self._key: tuple[int, int, int] | None | str = "unread"
        self._file: list[TokenRecord] = []
        self._broken = False
        self._lock = threading.Lock()

    # -- reading --------------------------------------------------------------------------------

    def _stat_key(self) -> tuple[int, int, int] | None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _refresh(self) -> None:
        try:
            key = self._stat_key()
        except OSError as e:
            self._fail(f"cannot stat {self.path}: {e.strerror}")
            return
        if key == self._key:
            return
        with self._lock:
            if key == self._key:
                return
            if key is None:
                self._file, self._broken = [], False
            else:
                try:
                    self._file, self._broken = read_file(self.path), False
                except (OSError, ValueError, ConfigError, InvalidInput) as e:
                    self._fail(str(e))
            self._key = key

    def _fail(self, why: str) -> None:
        if not self._broken:
            log.error(
                "tokens file %s is unusable, so no token is accepted until it is fixed: %s", self.path, why
            )
        self._file, self._broken = [], True

    def records(self) -> list[TokenRecord]:
        self._refresh()
        return [*self.env, *self._file]

    def configured(self) -> bool:
        """Whether any token exists (or the file is broken: then nothing may pass unauthenticated)."""
        self._refresh()
        return bool(self.env or self._file or self._broken)

    def verify(self, token: str) -> TokenRecord | None:
        """The record whose hash is the token's, compared in constant time against every record."""
        if not isinstance(token, str) or not token:
            return None
        h = digest(token)
        found = None
        for r in self.records():
            if hmac.compare_digest(r.sha256, h):
                found = r
        return found

    # -- writing (memlane token create / revoke) --------------------------------------------------

    def create(self, name: str | None, projects: Any) -> tuple[str, TokenRecord]:
        patterns = check_projects(projects)
        token = PREFIX + secrets.token_urlsafe(32)
        sha = digest(token)
        name = check_name(name) if name is not None else f"token-{sha[:8]}"
        with _locked(self.path):
            current = read_file(self.path) if self.path.exists() else []
            if any(r.name == name for r in [*current, *self.env]):
                raise InvalidInput(
                    f"a token named {name!r} exists already; revoke it or choose another --name"
                )
            record = TokenRecord(name, sha, patterns, datetime.now(UTC).isoformat(timespec="seconds"))
            write_file(self.path, [*current, record])
        return token, record

    def revoke(self, which: str) -> TokenRecord:
        """Remove the file token named ``which``, or whose hash starts with ``which`` (6+ hex digits)."""
        with _locked(self.path):
            current = read_file(self.path) if self.path.exists() else []
            hits = [r for r in current if r.name == which]
            if not hits and re.fullmatch(r"[0-9a-f]{6,64}", which):
                hits = [r for r in current if r.sha256.startswith(which)]
            if not hits:
                env = (
                    " (tokens from MEMLANE_AUTH__TOKENS are removed there)"
                    if any(r.name == which for r in self.env)
                    else ""
                )
                raise InvalidInput(
                    f"no token named {which!r} or with a hash starting with it in {self.path}{env}"
                )
            if len(hits) > 1:
                raise InvalidInput(
                    f"{which!r} starts the hashes of {len(hits)} tokens ({', '.join(r.name for r in hits)}): "
                    "give the name or more digits"
                )
            write_file(self.path, [r for r in current if r is not hits[0]])
        return hits[0]


def read_file(path: Path) -> list[TokenRecord]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not JSON: {e.msg} at line {e.lineno}") from None
    if not isinstance(data, dict) or not isinstance(data.get("tokens"), list):
        raise ValueError(f'{path}: expected {{"tokens": [...]}}')
    try:
        records = [_record(o, "file") for o in data["tokens"]]
    except (ValueError, InvalidInput) as e:
        raise ValueError(f"{path}: {e}") from None
    _unique(records)
    return records


def write_file(path: Path, records: list[TokenRecord]) -> None:
    """Replace the file atomically (readers see the old or the new one), readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "tokens": [
            {"name": r.name, "sha256": r.sha256, "projects": list(r.projects), "created": r.created}
            for r in records
        ]
    }
    fd, tmp = tempfile.mkstemp(prefix=".tokens-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise create/revoke between processes (a lock file next to the tokens file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: last writer wins
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
