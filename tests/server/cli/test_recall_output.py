"""``memlane recall`` without --json prints for a person: a sentence when nothing is found, the
projects there are when the one named does not exist (exit 2), and replaced memories marked with
what replaced them and when. ``--json`` stays the tool's answer."""

from __future__ import annotations

import json

from memlane.pipeline.store.handles import handle_of


def remember(cli, content: str, project: str, *argv: str) -> str:
    code, out, err = cli("remember", content, "--project", project, *argv)
    assert code == 0, err
    return json.loads(out)["id"]


def test_nothing_found_in_a_project_that_exists_is_a_sentence_and_exit_0(cli):
    remember(cli, "Tidepool's cache is written in Rust", "tidepool")
    code, out, err = cli(
        "recall", "what is the weather on Mars", "--project", "tidepool", "--category", "nope"
    )
    assert code == 0, err
    assert out.strip() == (
        "No memory in project 'tidepool' matches 'what is the weather on Mars' with these filters. "
        "Try other words, fewer filters, or --project '*' to search every project."
    )
    assert "answer without memories" not in out  # the note written for a model


def test_an_unknown_project_is_named_with_the_projects_there_are_and_exit_2(cli):
    remember(cli, "Tidepool's cache is written in Rust", "tidepool")
    remember(cli, "The garden needs water on Sundays", "garden")
    remember(cli, "Tomatoes go in the sunny bed", "garden")
    code, out, err = cli("recall", "cache", "--project", "tidepol")
    assert code == 2 and out == ""
    assert "there is no project 'tidepol' (no memory is stored there). Did you mean 'tidepool'?" in err
    assert "Projects with memories: garden (2), tidepool (1)." in err
    # One typo among several names is still named.
    code, _, err = cli("recall", "cache", "--project", "tidepool,gardn")
    assert (
        code == 2 and "there is no project 'gardn' (no memory is stored there). Did you mean 'garden'?" in err
    )
    code, _, err = cli("recall", "cache", "--project", "tidepol,gardn")
    assert code == 2 and "there are no projects 'tidepol', 'gardn'" in err
    assert "Did you mean 'tidepool' or 'garden'?" in err
    # Every project, and names that exist, answer as before.
    assert cli("recall", "cache", "--project", "*")[0] == 0
    assert cli("recall", "cache", "--project", "tidepool,garden")[0] == 0
    # --json stays the tool's answer: exit 0, the model's note.
    code, out, _ = cli("recall", "cache", "--project", "tidepol", "--json")
    assert code == 0 and json.loads(out)["memories"] == []


def test_an_empty_default_project_is_said_with_the_projects_there_are(cli):
    code, _, err = cli("recall", "anything")
    assert code == 2
    assert "the default project 'default' has no memories" in err
    assert "There are no memories yet, in any project" in err
    # Every project of an empty store: said to the person, not the tool's refusal.
    code, _, err = cli("recall", "anything", "--project", "*")
    assert code == 2 and "there is no memory in any project yet" in err, err
    remember(cli, "The garden needs water on Sundays", "garden")
    code, _, err = cli("recall", "anything")
    assert code == 2 and "Projects with memories: garden (1)." in err
    remember(cli, "Standup is at nine", "default")
    code, out, err = cli("recall", "when is standup?")
    assert code == 0, err
    assert "Standup is at nine" in out


def test_a_replaced_memory_is_marked_with_what_replaced_it_and_when(cli):
    old = remember(cli, "Tidepool caches with redis", "tidepool", "--occurred-at", "2026-01-10")
    new = remember(cli, "Tidepool caches with sled", "tidepool", "--occurred-at", "2026-03-02")
    code, _, err = cli("supersede", old, new)
    assert code == 0, err
    code, out, err = cli("recall", "what does tidepool cache with?", "--project", "tidepool")
    assert code == 0, err
    blocks = out.split("\n 2. ")
    assert len(blocks) == 2, out
    by_content = {b.split("\n")[0].split(". ", 1)[-1].split(" [")[0]: b for b in blocks}
    current, replaced = by_content["Tidepool caches with sled"], by_content["Tidepool caches with redis"]
    assert "replaced by" not in current
    assert (
        f'replaced by {handle_of(new)} ("Tidepool caches with sled") on 2026-03-02 — '
        f"`memlane unsupersede {handle_of(old)}` to undo"
    ) in replaced
    # --include-history shows the earlier version under the current one.
    code, out, _ = cli(
        "recall", "what does tidepool cache with?", "--project", "tidepool", "--include-history"
    )
    assert code == 0
    assert f"earlier {handle_of(old)} (from 2026-01-10 until 2026-03-02): Tidepool caches with redis" in out
