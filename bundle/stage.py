"""Stage the MCP bundle: what ``uv run`` needs to build and run memlane from source, and the manifest.

``make bundle`` runs this (``python bundle/stage.py build/bundle``), then ``mcpb validate`` and
``mcpb pack`` on the staged directory. The bundle holds pyproject.toml, README.md (the package's
readme, so the build needs it), server/, pipeline/, prompts/ and bench/ (the package's code: the
wheel installs ``memlane.bench``), without caches; not bench/results/, tests, docs or anything
built. The manifest is bundle/manifest.json with the package's version put in:
pyproject.toml is the version's one source.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONTENTS = ("pyproject.toml", "README.md", "server", "pipeline", "prompts", "bench")
SKIP_NAMES = ("__pycache__", "*.pyc", "*.egg-info", ".DS_Store")
# bench/results/ holds the committed benchmark reports: data for the docs, no part of the package.
SKIP = {"bench": shutil.ignore_patterns(*SKIP_NAMES, "results")}


def manifest() -> dict[str, Any]:
    """bundle/manifest.json with ``version`` (pyproject.toml's) after ``name``."""
    template = json.loads((ROOT / "bundle" / "manifest.json").read_text(encoding="utf-8"))
    if "version" in template:
        raise SystemExit("bundle/manifest.json must not set version: it comes from pyproject.toml")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    out: dict[str, Any] = {}
    for key, value in template.items():
        out[key] = value
        if key == "name":
            out["version"] = version
    return out


def stage(dest: Path) -> Path:
    """A fresh ``dest`` with the bundle's files. An existing ``dest`` is replaced only if it is an
    earlier staging (it has a manifest.json), so a wrong path never deletes anything else."""
    dest = dest.resolve()
    if dest.exists():
        if not (dest / "manifest.json").is_file():
            raise SystemExit(f"{dest} exists and is not a staged bundle; not replacing it")
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in CONTENTS:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=SKIP.get(name, shutil.ignore_patterns(*SKIP_NAMES)))
        else:
            shutil.copy2(src, dest / name)
    (dest / "manifest.json").write_text(json.dumps(manifest(), indent=2) + "\n", encoding="utf-8")
    return dest


if __name__ == "__main__":
    print(stage(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "bundle"))
