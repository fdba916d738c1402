"""Every repository path the documentation and the code name must exist: `make docs` runs this after cog.

Docs -> code: in README.md and docs/*.md, a path is a code span that starts with one of the
repository's folders (``pipeline/recall/fuse.py``, ``tests/support/``); globs (``prompts/*/v1.md``)
must match something. Paths of other trees (a client's ``.vscode/mcp.json``, LoCoMo's
``data/locomo10.json``) start elsewhere and are not checked, nor what is generated under
``bench/results/`` besides its JSON.

Code -> docs: in the code (pipeline/, server/, bench/, prompts/, tests/, .ci/, the Makefile,
pyproject.toml, config.example.toml), every docs page named, quoted or not (docs/recall.md,
docs/recall.md#a-heading), must exist, with a heading for the anchor (MkDocs' slugs); a docs page of
another tree (a ``docs/`` folder outside this repository) is refused; and every repository path in
a code span, single or double backquotes, must exist as above. README.md's links to docs pages are
checked the same way, anchors included (MkDocs checks only the pages under docs/). Data (the
benchmarks' reports, the tests' fixtures) is not code; a file that names broken paths on purpose
says so (``SKIP``).

Exits non-zero, naming each missing path and the file (and line) that names it.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("pipeline/", "server/", "prompts/", "tests/", "docs/", "bench/", ".ci/")
SPAN = re.compile(r"`([A-Za-z0-9_.*/-]+)`")
# A docs page, with what precedes it on the path (empty: this repository's docs/) and its anchor.
DOC_LINK = re.compile(r"(?<![\w./-])((?:\.\./|[\w.-]+/)*)(docs/[\w.-]+\.md)(?:#([\w-]+))?")
# Where the code lives, and the files at the top that name paths too.
CODE_FOLDERS = ("pipeline", "server", "bench", "prompts", "tests", ".ci")
CODE_FILES = ("Makefile", "pyproject.toml", "config.example.toml")
# Data, not prose: the benchmarks' reports and the tests' fixtures.
NOT_CODE = ("bench/results", "tests/data")
# Code spans that look like paths and are not: MCP methods.
NOT_PATHS = {"server/discover"}
# Paths named on purpose that do not resolve: (file, name).
KNOWN: set[tuple[str, str]] = set()
# A file that names broken paths on purpose (this one, its tests) says so on a line of its own
# that starts with SKIP, and is not checked.
SKIP = "# check_doc_paths: skip this file"
# check_doc_paths: skip this file (KNOWN and the examples above name such paths)


def slug(heading: str) -> str:
    """The anchor MkDocs gives a heading (Python-Markdown's toc): its text without markup,
    lowercase, punctuation other than hyphens and underscores dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"[`*]", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page's headings (outside fenced code), as MkDocs numbers repeats
    (``name``, ``name_1``, ...); an attribute list's ``{#id}`` wins."""
    seen: set[str] = set()
    fence = None
    for line in page.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\s*(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif m.group(1).startswith(fence):
                fence = None
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if fence is not None or not m:
            continue
        text = m.group(1)
        explicit = re.search(r"\{[^}]*#([\w-]+)[^}]*\}\s*$", text)
        if explicit:
            seen.add(explicit.group(1))
            continue
        base = anchor = slug(text)
        n = 0
        while anchor in seen:
            n += 1
            anchor = f"{base}_{n}"
        seen.add(anchor)
    return seen


def _exists(root: Path, name: str) -> bool:
    return any(root.glob(name.rstrip("/"))) if "*" in name else (root / name).exists()


def missing(page: Path, root: Path = ROOT) -> list[str]:
    """The repository paths a page's code spans name that do not exist."""
    out = []
    for name in SPAN.findall(page.read_text(encoding="utf-8")):
        if not name.startswith(FOLDERS) or "..." in name or name in NOT_PATHS:
            continue
        if name.startswith("bench/results/") and not name.endswith(".json"):
            continue  # charts and screenshots are written there, never committed
        if not _exists(root, name):
            out.append(name)
    return out


def broken_doc_links(text: str, root: Path = ROOT) -> Iterator[tuple[int, str, str]]:
    """``(line, reference, why)`` for each docs page ``text`` names that is not there."""
    pages: dict[Path, set[str]] = {}
    for number, line in enumerate(text.splitlines(), 1):
        for m in DOC_LINK.finditer(line):
            prefix, path, anchor = m.groups()
            ref = m.group(0)
            if prefix:
                if prefix.startswith("../") or not (root / prefix / path).exists():
                    yield number, ref, "a docs page outside this repository"
                continue
            page = root / path
            if not page.is_file():
                yield number, ref, "which does not exist"
            elif anchor:
                if page not in pages:
                    pages[page] = anchors(page)
                if anchor not in pages[page]:
                    yield number, ref, f"but {path} has no heading with that anchor"


def code_files(root: Path = ROOT) -> Iterator[Path]:
    for name in CODE_FILES:
        if (root / name).is_file():
            yield root / name
    for folder in CODE_FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or "__pycache__" in path.parts or rel.startswith(NOT_CODE):
                continue
            yield path


def problems(root: Path = ROOT) -> list[str]:
    out = []
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    for page in pages:
        rel = page.relative_to(root).as_posix()
        out += [f"{rel}: names {name}, which does not exist" for name in missing(page, root)]
    readme = root / "README.md"
    if readme.is_file():
        for number, ref, why in broken_doc_links(readme.read_text(encoding="utf-8"), root):
            out.append(f"README.md:{number}: names {ref}, {why}")
    for path in code_files(root):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text
        if any(line.startswith(SKIP) for line in text.splitlines()):
            continue
        rel = path.relative_to(root).as_posix()
        found = set()
        for number, ref, why in broken_doc_links(text, root):
            if (rel, ref) not in KNOWN:
                found.add(f"{rel}:{number}: names {ref}, {why}")
        for name in missing(path, root):
            if not DOC_LINK.fullmatch(name):  # docs pages: reported above, with the line
                found.add(f"{rel}: names {name}, which does not exist")
        out += sorted(found)
    return out


def main(argv: list[str] | None = None) -> int:
    """``check_doc_paths.py [ROOT]``: the repository to check (default: this one)."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]).resolve() if args else ROOT
    bad = problems(root)
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
