"""What the Makefile's targets would install, read from ``make -n`` (nothing runs) against a venv
path that does not exist: ``make run`` installs memlane alone, as ``pip install memlane`` would (it
once brought the test and docs extras: a 1 GB venv), and the checks add the extras to that venv."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")


def planned(target: str, tmp_path: Path, *args: str) -> list[str]:
    venv = tmp_path / "venv"
    # Not the variables of a make this test may run under (`make test` passes its own down).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", target, f"VENV={venv}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert not venv.exists()  # a dry run
    return done.stdout.replace(str(venv), "VENV").splitlines()


def _installs(lines: list[str]) -> list[str]:
    return [line.split(" install ", 1)[1] for line in lines if "/pip install " in line]


def test_make_run_installs_memlane_without_extras_and_serves(tmp_path):
    lines = planned("run", tmp_path)
    assert _installs(lines) == ["-qq --upgrade pip", "-qq -e ."]
    assert lines[-1] == "VENV/bin/memlane serve"


def test_the_checks_add_the_test_and_docs_extras_to_the_same_venv(tmp_path):
    for target in ("test-fast", "lint", "docs", "install"):
        installs = _installs(planned(target, tmp_path))
        assert installs[-2:] == ["-qq -e .", "-qq -e '.[test,docs]'"], (target, installs)


def test_make_setup_runs_the_venvs_memlane_for_the_client(tmp_path):
    assert planned("setup", tmp_path, "CLIENT=cursor")[-1] == "VENV/bin/memlane setup cursor"
