"""The house's boundaries that import-linter cannot see: the tests' fixtures (tests/conftest.py and
tests/support/) do not import the benchmarks, so a test of the product never needs them; and every
package of the source tree is one the wheel ships (pyproject.toml lists them by hand)."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
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


def test_every_source_package_is_in_the_wheel():
    """A package missing from ``[tool.setuptools] packages`` works in the editable install and is
    absent from the wheel users install: only the slow packaging tests would notice."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(setuptools["packages"])
    found = set()
    for name, folder in setuptools["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join((name, *init.parent.relative_to(ROOT / folder).parts)))
    assert "memlane.pipeline.recall" in found  # the walk found the tree
    assert found <= listed, f"not in pyproject.toml's packages: {sorted(found - listed)}"
