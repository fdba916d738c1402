"""The stdio wire before the MCP SDK has loaded: ``initialize`` and ``tools/list`` answered from
what this same server answered last time, while the SDK (about a second to import) and the engine
load; then every message is handed to the SDK in order.

Why: a client that spawns memlane waits for ``tools/list`` before it shows the tools, and importing
the SDK alone takes longer than a client should wait. The answers do not depend on the database or
the model, only on the code, the settings and the protocol version the client asks for, so they
are kept in a cache file whose name is a hash of all of those (memlane's and the SDK's versions,
the source files' sizes and times, every ``MEMLANE_*`` variable, the config file's bytes, the
arguments). A miss (the first start, or after any of those changed) serves every message through
the SDK and records its answers for next time; a hit answers at once and gives the SDK the client's
own ``initialize`` under an id of ours (its reply, the same as the one sent, is dropped), so the
SDK's session is in the state the client believes it is in.

Nothing but protocol on stdout: as the SDK's own stdio transport does, fd 1 is pointed at stderr
and fd 0 at the null device while serving; the wire is kept on duplicates of them.

This module imports only the standard library: it runs before everything else.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

FRONT_ID = "memlane-stdio-front-initialize"
# What the cache answers, per protocol version: the 2025 handshake (``initialize``, then a
# session's ``tools/list``) and the 2026-07-28 stateless one (``server/discover``, and requests
# that name their version in ``_meta``).
CACHED = ("initialize", "server/discover", "tools/list")
VERSION_META = "io.modelcontextprotocol/protocolVersion"

_active: StdioFront | None = None


def active() -> StdioFront | None:
    return _active


def start(argv: list[str]) -> StdioFront | None:
    """Take the wire now when ``argv`` serves over stdio (the default transport); None otherwise.
    A wrong guess about the transport costs nothing: ``serve`` then runs HTTP and the front stays
    unused, having read nothing (it reads stdin only for stdio)."""
    global _active
    if _active is not None or not _serves_stdio(argv):
        return _active
    try:
        path = cache_path(argv)
    except Exception:  # noqa: BLE001 - a cache we cannot name is a cache we do without
        path = None
    _active = StdioFront(path)
    return _active


def _serves_stdio(argv: list[str]) -> bool:
    args = list(argv)
    while args and args[0] in ("--config", "--data-dir"):
        args = args[2:]
    if not args or args[0] != "serve" or any(a in ("-h", "--help") for a in args):
        return False
    if "--transport" in args:
        i = args.index("--transport")
        return args[i + 1 : i + 2] == ["stdio"]
    if any(a.startswith("--transport=") for a in args):
        return "--transport=stdio" in args
    env = os.environ.get("MEMLANE_SERVER__TRANSPORT")
    if env is not None:
        return env.strip().lower() == "stdio"
    config = _config_file(argv)
    if config is not None and config.is_file():
        import tomllib

        try:
            transport = tomllib.loads(config.read_text()).get("server", {}).get("transport", "stdio")
        except (OSError, ValueError):
            return False  # the settings will say what is wrong with the file
        return transport == "stdio"
    return True


def _config_file(argv: list[str]) -> Path | None:
    if "--config" in argv:
        i = argv.index("--config")
        if i + 1 < len(argv):
            return Path(argv[i + 1]).expanduser()
    env = os.environ.get("MEMLANE_CONFIG")
    return Path(env).expanduser() if env else None


def cache_path(argv: list[str]) -> Path:
    """The cache file for this code, these settings and these arguments."""
    from importlib import metadata

    h = hashlib.sha256()
    for dist in ("memlane", "mcp", "mcp-types"):
        try:
            h.update(f"{dist}={metadata.version(dist)}\n".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=none\n".encode())
    h.update(sys.version.encode())
    for root in _source_roots():
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith((".py", ".md", ".lock")):
                    st = os.stat(os.path.join(dirpath, name))
                    h.update(f"{dirpath}/{name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    for key in sorted(os.environ):
        if key.upper().startswith("MEMLANE_"):
            h.update(f"{key}={os.environ[key]}\n".encode())
    h.update(json.dumps(argv).encode())
    config = _config_file(argv)
    if config is not None and config.is_file():
        h.update(config.read_bytes())
    return _cache_dir(argv) / f"stdio-{h.hexdigest()[:24]}.json"


def _source_roots() -> list[str]:
    here = Path(__file__).resolve().parent  # server/mcp
    roots = {str(here.parent)}  # server/: the tools, their descriptions, the settings
    import importlib.util

    for name in ("memlane.pipeline", "memlane.prompts"):  # the parameter models, the config
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            roots.update(spec.submodule_search_locations)
    return sorted(roots)


def _cache_dir(argv: list[str]) -> Path:
    """Beside the data: ``--data-dir``, ``MEMLANE_DATA_DIR``, else the user's cache directory."""
    if "--data-dir" in argv:
        i = argv.index("--data-dir")
        if i + 1 < len(argv):
            return Path(argv[i + 1]).expanduser() / "cache"
    if os.environ.get("MEMLANE_DATA_DIR"):
        return Path(os.environ["MEMLANE_DATA_DIR"]).expanduser() / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir("memlane"))


class StdioFront:
    """Owns the wire (fds 0 and 1) from start-up to exit. ``sdk_streams()`` gives the SDK a
    reading end and a writing end; until then, a reader thread answers what the cache can and
    keeps the rest, in order, for the SDK."""

    def __init__(self, cache_file: Path | None) -> None:
        self.cache_file = cache_file
        self.cache: dict[str, dict[str, Any]] = _read_cache(cache_file)
        self._wire_out = os.fdopen(os.dup(1), "wb", buffering=0)
        self._wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
        self.stdin_is_tty = os.isatty(self._wire_in.fileno())  # a person at a terminal, not a client
        os.dup2(2, 1)  # stray output (a library's print) goes to stderr, never onto the wire
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        self._lock = threading.Lock()  # one writer on the wire at a time; guards the state below
        self._backlog: list[bytes] = []
        self._to_sdk: Any = None  # the pipe's writing end, once the SDK reads
        self._eof = False
        self.version: str | None = None  # the protocol version of this session
        self.answered: list[str] = []  # what the front answered itself (for the log and the tests)
        self._capture: dict[Any, tuple[str, str | None]] = {}  # request id -> (method, version) to keep
        threading.Thread(target=self._read, name="memlane-stdio-front", daemon=True).start()

    # -- the client's side ---------------------------------------------------------------------

    def _read(self) -> None:
        for line in iter(self._wire_in.readline, b""):
            if line.strip():
                self._on_line(line)
        with self._lock:
            self._eof = True
            if self._to_sdk is not None:
                self._to_sdk.close()

    def _on_line(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            msg = None
        cacheable = isinstance(msg, dict) and msg.get("method") in CACHED and "id" in msg
        with self._lock:
            version = self._version_of(msg) if cacheable else None
            if cacheable and msg["method"] == "initialize":
                self.version = version  # the session's, for its later requests
            reply = self._answer(msg, version) if cacheable and self._to_sdk is None else None
            if reply is not None:
                self._send(reply)
                if msg["method"] == "initialize":  # the SDK's session still needs to see it
                    self._forward(json.dumps({**msg, "id": FRONT_ID}).encode() + b"\n")
                return
            if cacheable and _plain(msg):
                self._capture[msg["id"]] = (msg["method"], version)
            self._forward(line)

    def _version_of(self, msg: dict) -> str | None:
        params = msg.get("params") or {}
        meta = params.get("_meta") or {}
        if isinstance(meta, dict) and meta.get(VERSION_META):
            return str(meta[VERSION_META])
        if msg["method"] == "initialize":
            return str(params.get("protocolVersion"))
        return self.version

    def _answer(self, msg: dict, version: str | None) -> dict | None:
        """The cached reply to ``msg``, or None (the SDK answers it)."""
        entry = self.cache.get(str(version))
        method = msg["method"]
        if entry is None or method not in entry:
            return None
        if method != "initialize" and not _plain(msg):
            return None  # a cursor, a filter: not the question the cache holds the answer to
        self.answered.append(method)
        return {"jsonrpc": "2.0", "id": msg["id"], "result": entry[method]}

    def _forward(self, line: bytes) -> None:
        if self._to_sdk is None:
            self._backlog.append(line)
        else:
            self._to_sdk.write(line)
            self._to_sdk.flush()

    def _send(self, msg: dict) -> None:
        self._wire_out.write(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    # -- the SDK's side ------------------------------------------------------------------------

    def sdk_streams(self) -> tuple[Any, Any]:
        """(what the SDK reads, what it writes to): text files for ``stdio_server``. What the
        front kept is in the first already, in the order the client sent it."""
        r, w = os.pipe()
        reader = os.fdopen(r, "r", encoding="utf-8", errors="replace")
        import logging  # (configured by now; not at start-up, where nothing but the wire is set up)

        with self._lock:
            if self.answered:
                logging.getLogger("memlane.server").info(
                    "stdio: answered %s from the start-up cache %s", ", ".join(self.answered), self.cache_file
                )
            self._to_sdk = os.fdopen(w, "wb", buffering=0)
            for line in self._backlog:
                self._to_sdk.write(line)
            self._backlog.clear()
            if self._eof:
                self._to_sdk.close()
        return reader, _SdkOut(self)

    def _from_sdk(self, text: str) -> None:
        """One write of the SDK's: a message and its newline."""
        if FRONT_ID in text and f'"id":"{FRONT_ID}"' in text.replace(" ", ""):
            return  # its answer to the initialize the client had answered already
        with self._lock:
            self._wire_out.write(text.encode("utf-8"))
            if self._capture:
                self._keep(text)

    def _keep(self, text: str) -> None:
        """Record the SDK's answer to a request the cache may answer next time (lock held)."""
        try:
            msg = json.loads(text)
        except ValueError:
            return
        key = self._capture.pop(msg.get("id"), None) if isinstance(msg, dict) else None
        if key is None or "result" not in msg or self.cache_file is None:
            return
        method, version = key
        entry = self.cache.setdefault(str(version), {})
        entry[method] = msg["result"]
        if "tools/list" in entry and ("initialize" in entry or "server/discover" in entry):
            _write_cache(self.cache_file, self.cache)


def _plain(msg: dict) -> bool:
    """True when a request asks nothing beyond its method (its ``_meta`` aside)."""
    params = msg.get("params") or {}
    return msg["method"] == "initialize" or not (set(params) - {"_meta"})


class _SdkOut:
    """The file the SDK's stdio transport writes to (through ``anyio.wrap_file``)."""

    def __init__(self, front: StdioFront) -> None:
        self._front = front

    def write(self, text: str) -> int:
        self._front._from_sdk(text)
        return len(text)

    def flush(self) -> None:
        pass


def _read_cache(path: Path | None) -> dict[str, dict[str, Any]]:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_cache(path: Path, cache: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a read-only data directory: no cache, every start through the SDK
        print(f"memlane: could not write the stdio cache {path}: {e}", file=sys.stderr)
