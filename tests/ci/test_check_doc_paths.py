"""``.ci/check_doc_paths.py`` (run by ``make docs``) on small trees of its own: the paths the docs
name, and the docs pages and repository paths the code names, anchors included."""

# check_doc_paths: skip this file (it names broken paths on purpose)
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checker():
    spec = importlib.util.spec_from_file_location("check_doc_paths", ROOT / ".ci" / "check_doc_paths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


PAGE = """# A page

## Recall: `max_tokens` and [the budget](other.md)

## Twice
## Twice

```sh
# not a heading
```
"""


def test_a_tree_whose_references_all_resolve_passes(checker, tmp_path, capsys):
    root = _tree(
        tmp_path,
        {
            "docs/page.md": PAGE + "See `server/app.py`.\n",
            "README.md": "[budget](docs/page.md#recall-max_tokens-and-the-budget), `bench/run.py`\n",
            "server/app.py": '"""Measured in docs/page.md#twice_1 (see ``bench/run.py``, ``server/discover``)."""\n',
            "bench/run.py": "# docs/page.md, `tests/`\n",
            "tests/test_x.py": "",
            "Makefile": "# docs/page.md#twice\n",
        },
    )
    assert checker.problems(root) == []
    assert checker.main([str(root)]) == 0
    assert capsys.readouterr().err == ""


def test_each_broken_reference_is_named_with_its_file(checker, tmp_path, capsys):
    root = _tree(
        tmp_path,
        {
            "docs/page.md": PAGE + "See `bench/gone.py`.\n",
            "README.md": "[x](docs/page.md#not-here)\n",
            "pipeline/a.py": (
                "# fine: docs/page.md#twice\n"
                "# docs/embedding.md has the measurement\n"
                "# (shared/docs/EVAL.md), ../shared/docs/x.md\n"
                '"""``pipeline/gone.py`` and docs/page.md#not-a-heading"""\n'
            ),
            "config.example.toml": "# see docs/page.md#not-here-either\n",
        },
    )
    assert sorted(checker.problems(root)) == sorted(
        [
            "docs/page.md: names bench/gone.py, which does not exist",
            "README.md:1: names docs/page.md#not-here, but docs/page.md has no heading with that anchor",
            "config.example.toml:1: names docs/page.md#not-here-either, but docs/page.md has no heading "
            "with that anchor",
            "pipeline/a.py:2: names docs/embedding.md, which does not exist",
            "pipeline/a.py:3: names shared/docs/EVAL.md, a docs page outside this repository",
            "pipeline/a.py:3: names ../shared/docs/x.md, a docs page outside this repository",
            "pipeline/a.py:4: names docs/page.md#not-a-heading, but docs/page.md has no heading with that anchor",
            "pipeline/a.py: names pipeline/gone.py, which does not exist",
        ]
    )
    assert checker.main([str(root)]) == 1
    assert "names docs/embedding.md" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("The evaluation protocol: `bench locomo`", "the-evaluation-protocol-bench-locomo"),
        ("`[recall.rrf_vector]`", "recallrrf_vector"),
        ("Sequences: memories remembered one at a time", "sequences-memories-remembered-one-at-a-time"),
        ("Footprint and start-up", "footprint-and-start-up"),
    ],
)
def test_slugs_are_mkdocs_slugs(checker, heading, anchor):
    assert checker.slug(heading) == anchor


def test_the_repository_passes(checker):
    assert checker.problems(ROOT) == []
