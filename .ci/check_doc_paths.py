"""Every repository path the documentation names must exist: `make docs` runs this after cog.

A path is a code span that starts with one of the repository's folders (``pipeline/recall/fuse.py``,
``tests/support/``); globs (``prompts/*/v1.md``) must match something. Paths of other trees (a
client's ``.vscode/mcp.json``, LoCoMo's ``data/locomo10.json``) start elsewhere and are not
checked, nor what is generated under ``bench/results/`` besides its JSON. Exits non-zero, naming each missing path and the page that names it.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("pipeline/", "server/", "prompts/", "tests/", "docs/", "bench/results/", ".ci/")
SPAN = re.compile(r"`([A-Za-z0-9_.*/-]+)`")


def missing(page: Path) -> list[str]:
    out = []
    for name in SPAN.findall(page.read_text(encoding="utf-8")):
        if not name.startswith(FOLDERS) or "..." in name:
            continue
        if name.startswith("bench/results/") and not name.endswith(".json"):
            continue  # charts and screenshots are written there, never committed
        found = any(ROOT.glob(name.rstrip("/"))) if "*" in name else (ROOT / name).exists()
        if not found:
            out.append(name)
    return out


def main() -> int:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    bad = [(page, name) for page in pages for name in missing(page)]
    for page, name in bad:
        print(f"{page.relative_to(ROOT)}: names {name}, which does not exist", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
