"""``memlane forget`` and ``memlane update``: the forget and update tools' operations for a person.
forget shows the memory and asks at a terminal, takes --yes, and refuses without either; update
takes MemoryPatch's fields as options. Bad ids, another project's id and an empty patch are errors."""

from __future__ import annotations

import io
import json

import pytest

from memlane.pipeline.store.handles import handle_of


class Terminal(io.StringIO):
    """Standard input at a terminal, with the person's answer already typed."""

    def isatty(self) -> bool:
        return True


def remember(cli, content: str, project: str = "cli", *argv: str) -> str:
    code, out, err = cli("remember", content, "--project", project, *argv)
    assert code == 0, err
    return json.loads(out)["id"]


def exists(cli, memory_id: str) -> bool:
    code, _, err = cli("history", memory_id)
    assert code in (0, 1), err
    return code == 0


def test_forget_without_a_terminal_or_yes_refuses_and_keeps_the_memory(cli, monkeypatch):
    mid = remember(cli, "The office wifi password rotates monthly")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # a pipe, not a terminal
    code, out, err = cli("forget", mid)
    assert code == 2 and out == ""
    assert f"not deleting memory {handle_of(mid)}" in err and "--yes" in err
    assert exists(cli, mid)


@pytest.mark.parametrize(
    ("answer", "deleted"), [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)]
)
def test_forget_at_a_terminal_shows_the_memory_and_asks(cli, monkeypatch, answer, deleted):
    mid = remember(cli, "The office wifi password rotates monthly", "cli", "--tag", "office")
    monkeypatch.setattr("sys.stdin", Terminal(answer))
    code, out, err = cli("forget", handle_of(mid))
    assert "This memory will be deleted for good:" in err
    assert "The office wifi password rotates monthly" in err and "tags office" in err
    assert err.endswith("Forget it? [y/N] ")
    assert (code == 0) is deleted
    assert ("Forgot " + mid in out) is deleted
    assert ("Nothing deleted." in out) is not deleted
    assert exists(cli, mid) is not deleted


def test_forget_yes_deletes_and_json_is_the_tools_result(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    first = remember(cli, "Lunch is at noon on Fridays")
    code, out, err = cli("forget", first, "--yes")
    assert code == 0, err
    assert out.strip() == f"Forgot {first} (project cli): Lunch is at noon on Fridays"
    assert not exists(cli, first)
    second = remember(cli, "The build server is called hopper")
    code, out, _ = cli("forget", handle_of(second), "-y", "--json")
    assert code == 0
    assert json.loads(out) == {
        "id": second,
        "status": "forgotten",
        "content": "The build server is called hopper",
    }


def test_forget_of_an_unknown_or_another_projects_id_is_an_error(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    mid = remember(cli, "The build server is called hopper", "infra")
    code, _, err = cli("forget", "0123456789abcdef", "--yes")
    assert code == 1 and "no memory id starts with '0123456789abcdef'" in err
    code, _, err = cli("forget", mid, "--yes", "--project", "garden")
    assert code == 1
    assert f"memory {handle_of(mid)} is in project 'infra', not 'garden'; nothing changed" in err
    assert exists(cli, mid)
    assert cli("forget", mid, "--yes", "--project", "infra")[0] == 0


def test_update_changes_the_fields_given_and_keeps_the_old_content(cli):
    mid = remember(cli, "Tidepool targets v0.3 in March", "tidepool", "--category", "plans")
    code, out, err = cli(
        "update", handle_of(mid), "--content", "Tidepool targets v0.3 in April", "--tag", "release",
        "--tag", "tidepool", "--priority", "4", "--pinned",
    )  # fmt: skip
    assert code == 0, err
    assert "Tidepool targets v0.3 in April" in out
    assert "category plans" in out and "tags release, tidepool" in out and "priority 4" in out
    assert "pinned" in out
    assert f"`memlane history {handle_of(mid)}`" in out
    code, out, _ = cli("history", mid, "--json")
    h = json.loads(out)
    assert h["memory"]["content"] == "Tidepool targets v0.3 in April" and h["memory"]["pinned"] is True
    assert [v["content"] for v in h["versions"]] == ["Tidepool targets v0.3 in March"]
    code, out, _ = cli("update", mid, "--no-pinned", "--fact-type", "experience", "--json")
    assert code == 0
    result = json.loads(out)
    assert result["id"] == mid and result["pinned"] is False and result["fact_type"] == "experience"
    assert result["content"] == "Tidepool targets v0.3 in April" and result["priority"] == 4


def test_update_with_nothing_to_change_or_a_bad_value_or_id_is_an_error(cli):
    mid = remember(cli, "Tidepool targets v0.3 in March", "tidepool")
    code, out, err = cli("update", mid)
    assert code == 1 and out == ""
    assert "nothing to update: give at least one of --content, --category, --tag" in err
    code, _, err = cli("update", mid, "--priority", "9")
    assert code == 1 and "priority" in err
    code, _, err = cli("update", mid, "--metadata", "{not json")
    assert code == 1 and "--metadata is not valid JSON" in err
    code, _, err = cli("update", "0123456789abcdef", "--content", "x")
    assert code == 1 and "no memory id starts with" in err
    code, _, err = cli("update", mid, "--content", "Tidepool ships in May", "--project", "garden")
    assert code == 1 and "is in project 'tidepool', not 'garden'" in err
    code, out, _ = cli("history", mid, "--json")
    assert json.loads(out)["memory"]["content"] == "Tidepool targets v0.3 in March"  # nothing changed
