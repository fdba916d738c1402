"""The house's boundaries that import-linter cannot see: the tests' fixtures (tests/conftest.py and
tests/support/) do not import the benchmarks, so a test of the product never needs them."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FIXTURES = [TESTS / "conftest.py", *sorted((TESTS / "support").glob("*.py"))]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_tests_fixtures_never_import_the_benchmarks():
    assert len(FIXTURES) > 2  # conftest.py and the support modules were found
    found = {
        f"{path.relative_to(TESTS)}: {name}"
        for path in FIXTURES
        for name in _imports(path)
        if name == "memlane.bench" or name.startswith("memlane.bench.")
    }
    assert not found, f"the fixtures import the benchmarks: {sorted(found)}"
