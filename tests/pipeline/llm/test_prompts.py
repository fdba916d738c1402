"""Versioned prompts: strict rendering, every file valid, released versions locked."""

import pytest

from memlane.pipeline.config import LLM_STAGES
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.llm import prompts

GOOD = """---
name: demo
version: 1
purpose: a test
variables: question
output: text
---
## system
You answer.

## user
Q: {{question}}
"""


def test_every_packaged_prompt_parses_and_the_llm_stages_have_theirs():
    cat = prompts.catalogue()
    assert set(LLM_STAGES) | {"category_match"} <= set(cat)
    for stage in LLM_STAGES:
        assert prompts.get(stage).id.startswith(f"{stage}@v")


def test_released_prompt_versions_are_never_edited():
    missing, changed = prompts.unlocked_or_changed()
    assert not changed, (
        f"{changed} changed after release: restore the file and put the change in a new version "
        "(prompts/<name>/v<N+1>.md)"
    )
    assert not missing, f"{missing} are not in prompts/prompts.lock: add their sha256 when releasing them"


def test_an_edited_released_version_is_caught(monkeypatch):
    real = prompts.lock()
    monkeypatch.setattr(prompts, "lock", lambda: {**real, "rerank@v1": "0" * 64})
    assert prompts.unlocked_or_changed()[1] == ["rerank@v1"]


def test_rendering_is_strict_about_missing_and_unknown_variables():
    p = prompts.parse(GOOD, where="demo/v1.md")
    assert p.render(question="why?") == ("You answer.", "Q: why?")
    with pytest.raises(ConfigError, match="missing variable.*question"):
        p.render()
    with pytest.raises(ConfigError, match="unknown variable.*colour"):
        p.render(question="q", colour="red")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD.replace("variables: question", "variables: question, extra"), "declared .* and used .* differ"),
        (GOOD.replace("## user", "## usr"), "'## system' then a '## user'"),
        (GOOD.replace("purpose: a test\n", ""), "header lacks purpose"),
        ("no header here", "starts with a header"),
        (GOOD.replace("version: 1", "version: one"), "is not a number"),
    ],
)
def test_a_broken_template_is_an_error_naming_the_file(text, message):
    with pytest.raises(ConfigError, match=message) as e:
        prompts.parse(text, where="prompts/demo/v1.md")
    assert "prompts/demo/v1.md" in str(e.value)


def test_an_unknown_prompt_version_says_which_exist():
    with pytest.raises(ConfigError, match="no v9; versions: v1"):
        prompts.get("rerank", 9)


def test_prompts_list_and_show_from_the_command_line(capsys):
    from memlane.server.cli.main import main

    assert main(["prompts", "list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{s}@v1#" in out for s in LLM_STAGES)
    assert main(["prompts", "show", "hyde@v1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# {prompts.get('hyde', 1).id}") and "## system" in out and "{{question}}" in out
    assert main(["prompts", "show", "hyde@latest"]) == 1
