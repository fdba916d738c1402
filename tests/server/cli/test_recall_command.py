"""``memlane remember`` and ``memlane recall``: their options are the request values' parameters,
so the recall options the tool does not have (--since, --until, --pinned) and the ones the CLI
gained (--as-of, --include-history, --budget) reach the engine and change the answer."""

from __future__ import annotations

import json

import pytest

from memlane.pipeline.recall.query import RecallQuery
from memlane.server.cli import options
from memlane.server.cli.main import _parser


def recalled(cli, *argv: str) -> dict:
    code, out, err = cli("recall", *argv, "--project", "cli", "--json")
    assert code == 0, err
    return json.loads(out)


def test_recall_options_reach_the_engine(cli):
    code, out, _ = cli(
        "remember", "The team deployed with Jenkins", "--project", "cli", "--occurred-at", "2023-01-10"
    )
    assert code == 0
    old = json.loads(out)["id"]
    code, out, _ = cli(
        "remember", "The team deploys with GitHub Actions", "--project", "cli", "--occurred-at", "2024-06-01",
        "--pinned", "--fact-type", "world",
    )  # fmt: skip
    assert code == 0
    new = json.loads(out)["id"]
    code, _, err = cli("supersede", old, new)
    assert code == 0, err
    question = "how does the team deploy?"

    def contents(*argv: str) -> list[str]:
        return [m["content"] for m in recalled(cli, question, *argv)["memories"]]

    assert set(contents()) == {"The team deployed with Jenkins", "The team deploys with GitHub Actions"}
    assert contents("--until", "2024-01-01") == ["The team deployed with Jenkins"]
    assert contents("--since", "2024-01-01") == ["The team deploys with GitHub Actions"]
    assert contents("--pinned") == ["The team deploys with GitHub Actions"]
    assert contents("--no-pinned") == ["The team deployed with Jenkins"]
    # As of before the supersession, the memory valid then comes first.
    assert contents()[0] == "The team deploys with GitHub Actions"
    assert contents("--as-of", "2023-06-01")[0] == "The team deployed with Jenkins"
    current = recalled(cli, question, "--include-history")["memories"][0]
    assert [h["content"] for h in current["history"]] == ["The team deployed with Jenkins"]
    assert "history" not in recalled(cli, question)["memories"][0]


def test_budget_is_an_option_with_the_declared_choices(cli):
    assert cli("remember", "The billing service runs on PostgreSQL", "--project", "cli")[0] == 0
    trace = json.dumps(recalled(cli, "which database for billing?", "--budget", "low", "--explain")["trace"])
    assert '"budget": "low"' in trace  # the graph arm's expansion was the low budget's
    with pytest.raises(SystemExit) as exit_:
        cli("recall", "x", "--budget", "huge")
    assert exit_.value.code == 2


def test_a_bad_recall_option_says_what_the_tool_says(cli):
    code, _, err = cli("recall", "x", "--limit", "0")
    assert code == 1 and "limit must be an integer from 1 to 100" in err
    code, _, err = cli("recall", "x", "--as-of", "someday")
    assert code == 1 and "as_of" in err


def test_project_option_takes_repeats_and_commas():
    parser = _parser()

    def project(*argv: str):
        return options.given(parser.parse_args(["recall", "q", *argv]), RecallQuery)["project"]

    assert project() is None
    assert project("--project", "web") == "web"
    assert project("--project", "web,mobile", "--project", "api") == ["web", "mobile", "api"]
    assert project("--project", "*") == "*"
