"""``memlane setup`` in-process against a temporary home: a ``Host`` of the test's own (home,
platform, environment) and a runner that parses the arguments as the CLI does."""

from __future__ import annotations

import io
import os
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from memlane.server.cli import setup
from memlane.server.cli.clients import Host
from memlane.server.cli.main import _parser


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str


def make_host(tmp_path: Path, platform: str = "linux", **environ: str) -> Host:
    """A home directory under ``tmp_path`` and an environment with only HOME and a PATH that holds
    nothing (so no ``claude`` or ``uvx`` is found unless a test puts one there)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    empty_bin = tmp_path / "empty-bin"
    empty_bin.mkdir(exist_ok=True)
    return Host(home, platform, {"HOME": str(home), "PATH": str(empty_bin), **environ})


def run_setup(host: Host, *argv: str, top: tuple[str, ...] = ()) -> Ran:
    """``memlane [top...] setup argv...`` on ``host``: exit code, stdout, stderr."""
    args = _parser().parse_args([*top, "setup", *argv])
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = setup.run(args, host=host)
    return Ran(code, out.getvalue(), err.getvalue())


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".memlane-backup-*"))


def this_memlane() -> str:
    """The console script the entry should run: this venv's."""
    return os.path.join(os.path.dirname(os.path.abspath(sys.executable)), "memlane")
