"""Standing instructions and preferences: classified when stored, added by recall to the requests
they apply to though they share few words with them, marked ``kind: "instruction"``, listed by the
``memlane://projects/{project}/instructions`` resource; over a real store and a real MCP client."""

from __future__ import annotations

import json

import pytest
from support.clients import call_ok

from memlane.pipeline.recall.instructions import condition
from memlane.pipeline.remember.facttypes import classify

pytestmark = pytest.mark.anyio

INSTRUCTION = "Always include version numbers when I ask about software dependencies or libraries used."
PREFERENCE = "I prefer simple, minimal dependencies over big frameworks."
PROJECT_NOTES = [
    "The budget tracker is a Flask app with a SQLite database.",
    "We deploy the budget tracker to a small VPS with gunicorn behind nginx.",
    "The expense form validates amounts on the server before saving them.",
    "The user asked how to add charts for monthly spending; we used plain SVG.",
    "Login sessions expire after 30 minutes of inactivity.",
    "The tests run with pytest on every push.",
]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (INSTRUCTION, "instruction"),
        ("user: Never use tabs in Python files.", "instruction"),
        ("From now on, answer in French.", "instruction"),
        (PREFERENCE, "preference"),
        ("user: I'm keeping the app small, so I'd rather avoid heavy frameworks.", "preference"),
        ("assistant: Always remember to validate input.", "world"),  # restated, not the user's
        ("Never mind.", "world"),
        ("Caroline: I always loved painting.", "world"),
        ("I never went to Japan.", "experience"),
    ],
)
def test_instructions_and_preferences_are_classified_when_stored(text, expected):
    assert classify(text) == expected


def test_an_instruction_s_condition_is_what_the_request_must_be_about():
    assert condition(INSTRUCTION) == "software dependencies or libraries used"
    assert condition("Always answer in French.") is None


async def test_recall_adds_what_applies_and_the_resource_lists_them(connect):
    async with connect() as client:
        for text in PROJECT_NOTES:
            await call_ok(client, "remember", {"content": text, "project": "tracker"})
        inst = await call_ok(client, "remember", {"content": INSTRUCTION, "project": "tracker"})
        pref = await call_ok(client, "remember", {"content": PREFERENCE, "project": "tracker"})
        res = await call_ok(
            client, "recall", {"query": "Which libraries are used in this project?", "project": "tracker"}
        )
        first = res["memories"][:3]
        assert any(m["content"] == INSTRUCTION and m["kind"] == "instruction" for m in first), first
        assert all("kind" not in m for m in res["memories"] if m["content"] in PROJECT_NOTES)
        # A question nothing governs gets no instruction.
        other = await call_ok(
            client, "recall", {"query": "When do login sessions expire?", "project": "tracker"}
        )
        assert all(m["content"] not in (INSTRUCTION, PREFERENCE) for m in other["memories"])
        listed = json.loads(
            (await client.read_resource("memlane://projects/tracker/instructions")).contents[0].text
        )
    assert listed["project"] == "tracker"
    assert [(i["id"], i["kind"]) for i in listed["instructions"]] == [
        (pref["id"], "preference"),
        (inst["id"], "instruction"),
    ]


async def test_instructions_are_off_with_instructions_max_0(engine_config, open_engine):
    cfg = engine_config.model_copy(
        update={"recall": engine_config.recall.model_copy(update={"instructions_max": 0})}
    )
    eng = await open_engine(cfg)
    await eng.remember({"content": INSTRUCTION, "project": "p"})
    res = await eng.recall({"query": "Which libraries does the app use?", "project": "p"})
    stage = {s.stage: s for s in res.trace.stages}["adjustments"]
    assert stage.detail["instructions"] == "skipped: [recall] instructions_max = 0"
