"""Where a docs page lists the fact types, it lists every one the code has (``FACT_TYPES``): the
tool and CLI tables are generated, but prose lists are written by hand and once named three of
five. A list of two (a page speaking of instructions and preferences only) is a subset on purpose;
three or more is meant to be all of them."""

from __future__ import annotations

import re
from pathlib import Path

from memlane.pipeline.validate import FACT_TYPES

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_TYPES = "|".join(FACT_TYPES)
_NAME = rf"[`\"']?(?:{_TYPES})[`\"']?"
_SEP = r"\s*(?:/|,|\\?\||\bor\b|\band\b)\s*"
_RUN = re.compile(rf"\b{_NAME}(?:{_SEP}{_NAME})+")


def short_lists(text: str) -> list[str]:
    """Lists of three or more fact types in ``text`` that leave one out."""
    runs = (m.group(0) for m in _RUN.finditer(text))
    return [r for r in runs if 3 <= len(set(re.findall(_TYPES, r))) < len(FACT_TYPES)]


def test_every_list_of_fact_types_in_the_docs_is_whole():
    found = {page.name: short_lists(page.read_text(encoding="utf-8")) for page in PAGES}
    assert any(page.name == "write-path.md" for page in PAGES)
    assert not {page: runs for page, runs in found.items() if runs}, found


def test_the_write_paths_fact_types_explain_each_one():
    text = (ROOT / "docs" / "write-path.md").read_text(encoding="utf-8")
    bullet = text[text.index("- **Fact types**") :].split("\n- ", 1)[0]
    assert [t for t in FACT_TYPES if f"`{t}`" not in bullet] == []


def test_a_list_that_leaves_a_type_out_is_found():
    assert short_lists("by fact type (`?fact_type=` world / experience / opinion)") == [
        "world / experience / opinion"
    ]
    assert short_lists("an instruction or preference applies") == []
    assert short_lists(" | ".join(f'"{t}"' for t in FACT_TYPES)) == []
