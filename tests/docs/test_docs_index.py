"""docs/index.md, the site's front page, lists every page of mkdocs.yml's nav, in the nav's order:
a page added to the site and not to the index is a page a reader of the index never finds."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(entries: list) -> list[str]:
    pages: list[str] = []
    for entry in entries:
        target = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(target) if isinstance(target, list) else [target]
    return pages


def _index_pages(text: str) -> list[str]:
    """The pages the index's table links to, first column, in its order."""
    return re.findall(r"^\| \[[^\]]+\]\(([\w./-]+\.md)\) \|", text, re.M)


def test_the_index_lists_every_page_of_the_nav_in_its_order():
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"])
    assert nav[0] == "index.md" and "production.md" in nav  # the nav was read, nested sections too
    listed = _index_pages((ROOT / "docs" / "index.md").read_text(encoding="utf-8"))
    assert listed == nav[1:], f"missing: {[p for p in nav[1:] if p not in listed]}"


def test_the_index_reader_finds_a_missing_page():
    table = "| page | what |\n|---|---|\n| [A](a.md) | one |\n| [C](sub/c.md) | three |\n"
    assert _index_pages(table) == ["a.md", "sub/c.md"]
    nav = _nav_pages([{"Home": "index.md"}, {"Part": [{"A": "a.md"}, {"B": "b.md"}]}, {"C": "sub/c.md"}])
    assert nav[1:] == ["a.md", "b.md", "sub/c.md"] != _index_pages(table)
