"""What a client's memlane entry runs: this same memlane. Pure functions of what the process is
(``Process``), so that the tests can be a venv, pipx, ``uv tool`` or ``uvx`` on any platform:

- run by ``uvx`` (``uv_ephemeral``): ``uvx --from SPEC memlane serve``, with SPEC the local wheel
  memlane was installed from, else ``memlane==<version>`` (``uvx_spec``). uv's cache is no place to
  point a client at: the environment is rebuilt, or removed by ``uv cache clean``, at any time.
- otherwise (``local_command``): the console script's absolute path, and ``serve``.

Standard library only, like ``setup``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from urllib.parse import unquote, urlparse

NAME = "memlane"


@dataclass(frozen=True)
class Process:
    """This memlane: ``sys.prefix``, ``sys.executable``, ``sys.argv[0]``, and what its installer
    recorded (PEP 610's ``direct_url.json``; None when it came from an index) and its version."""

    prefix: str
    executable: str
    argv0: str
    direct_url: str | None = None
    version: str = "0"

    @classmethod
    def current(cls) -> Process:
        from importlib.metadata import PackageNotFoundError, distribution  # ~40 ms: only here

        try:
            dist = distribution(NAME)
            direct_url, version = dist.read_text("direct_url.json"), dist.version
        except PackageNotFoundError:
            direct_url, version = None, "0"
        return cls(sys.prefix, sys.executable, sys.argv[0], direct_url, version)


def uv_ephemeral(prefix: str, *, home: Path, platform: str, environ: Mapping[str, str]) -> bool:
    """Whether ``prefix`` is one of the environments uv makes in its cache for ``uvx`` / ``uv tool
    run``: ``~/.cache/uv/archive-v0/<hash>`` (``$XDG_CACHE_HOME/uv/...``, ``$UV_CACHE_DIR/...``;
    on Windows ``%LOCALAPPDATA%\\uv\\cache\\archive-v0\\...``). The ``archive-v0`` folder under a
    ``uv`` or ``cache`` one is enough, wherever the cache is; so is any path inside the cache
    directory the environment names. ``uv tool install`` puts its environments in uv's data
    directory instead: they last, and their console script is used as is."""
    pure = _pure(platform)
    path = pure(prefix)
    parts = [p.lower() for p in path.parts]
    if any(a in ("uv", "cache") and b == "archive-v0" for a, b in zip(parts, parts[1:], strict=False)):
        return True
    caches = [environ.get("UV_CACHE_DIR", "")]
    if platform == "win32":
        local = environ.get("LOCALAPPDATA", "")
        caches.append(str(pure(local, "uv", "cache")) if local else "")
    else:
        caches.append(str(pure(environ.get("XDG_CACHE_HOME") or str(home / ".cache"), "uv")))
    return any(c and pure(c).is_absolute() and path.is_relative_to(pure(c)) for c in caches)


def uvx_spec(direct_url: str | None, version: str, platform: str = sys.platform) -> str:
    """What ``uvx --from`` should install: the local file (a wheel, or a directory) memlane was
    installed from, as the installer recorded it (``{"url": "file:///.../memlane-0.1.0-...whl",
    "archive_info": {}}``), else the released version, ``memlane==<version>``."""
    try:
        url = json.loads(direct_url)["url"] if direct_url else ""
    except (ValueError, KeyError, TypeError):
        url = ""
    parsed = urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme != "file":
        return f"{NAME}=={version}"
    path = unquote(parsed.path)
    if parsed.netloc and parsed.netloc != "localhost":
        path = f"//{parsed.netloc}{path}"  # a UNC share
    if platform == "win32":
        path = str(PureWindowsPath(path[1:] if path[:1] == "/" and path[2:3] == ":" else path))
    return path


def local_command(executable: str, argv0: str, platform: str) -> tuple[str, list[str]]:
    """This install's console script: the ``memlane`` next to the interpreter (a venv's, pipx's,
    ``uv tool``'s ``bin/``; not resolved, as a venv's python is a symlink out of the venv), else
    the script this process was started as (resolved), else the interpreter running the CLI's
    module (``python -m memlane.server.cli.main serve``)."""
    exe = "memlane.exe" if platform == "win32" else NAME
    beside = Path(os.path.abspath(executable)).parent / exe
    if beside.is_file():
        return str(beside), ["serve"]
    started = Path(argv0)
    if platform == "win32" and not started.suffix:
        started = started.with_suffix(".exe")
    if started.name.lower() == exe and started.is_file():
        return str(started.resolve()), ["serve"]
    return os.path.abspath(executable), ["-m", "memlane.server.cli.main", "serve"]


def _pure(platform: str) -> type[PurePath]:
    return PureWindowsPath if platform == "win32" else PurePosixPath
