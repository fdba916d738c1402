"""Stage 8's registered steps (``STAGE8_STEPS``) over a real store: each degrades alone, each is
switched off by its ``[recall.steps]`` setting, and they run in the registry's order."""

from __future__ import annotations

import dataclasses

import pytest

from memlane.pipeline.recall import run
from memlane.pipeline.recall.query import Ablation, RecallQuery

pytestmark = pytest.mark.anyio

NAMES = [s.name for s in run.STAGE8_STEPS]
NOTES = [
    "user: The budget tracker app uses Flask and SQLite.",
    "assistant: In summary, the budget tracker app uses the Flask and SQLite libraries: Flask and SQLite.",
    "Always include version numbers when I ask about libraries.",
]
QUESTION = "Give me a summary of which libraries the budget tracker app uses"


@pytest.fixture
async def stored(engine):
    for i, text in enumerate(NOTES):
        await engine.remember({"content": text, "project": "p", "occurred_at": f"2024-03-0{i + 1}"})
    return engine


async def _ask(engine):
    req = RecallQuery.parse(engine.config, {"query": QUESTION, "project": "p"})
    res = await engine.recall(req.model_copy(update={"count_accesses": False, "ablation": Ablation()}))
    return res, {s.stage: s for s in res.trace.stages}["adjustments"]


def _recording(monkeypatch, calls):
    """The registry with each step recording its name before it runs."""

    def wrap(sub):
        async def fn(ctx, candidates):
            calls.append(sub.name)
            return await sub.fn(ctx, candidates)

        return dataclasses.replace(sub, fn=fn)

    monkeypatch.setattr(run, "STAGE8_STEPS", tuple(wrap(s) for s in run.STAGE8_STEPS))


def test_the_registry_names_every_step_once_with_its_switch(engine_config):
    assert NAMES == ["current", "echoes", "coverage", "instructions"]
    switches = engine_config.recall.steps
    assert all(getattr(switches, s.switch) is True for s in run.STAGE8_STEPS)  # every one on by default
    assert {s.switch for s in run.STAGE8_STEPS} == set(type(switches).model_fields)


@pytest.mark.parametrize("name", NAMES)
async def test_a_step_that_raises_degrades_alone_and_recall_still_answers(stored, monkeypatch, name):
    async def broken(ctx, candidates):
        raise RuntimeError("step broke")

    monkeypatch.setattr(
        run,
        "STAGE8_STEPS",
        tuple(dataclasses.replace(s, fn=broken) if s.name == name else s for s in run.STAGE8_STEPS),
    )
    res, stage = await _ask(stored)
    assert res.memories, "recall answers without the step"
    assert stage.status == "ran" and stage.detail[name] == "degraded: RuntimeError: step broke"
    assert all(not str(stage.detail[n]).startswith("degraded") for n in NAMES if n != name)
    assert list(stage.detail["steps_ms"]) == NAMES


@pytest.mark.parametrize("name", NAMES)
async def test_each_switch_turns_its_step_off(engine_config, open_engine, monkeypatch, name):
    switch = next(s.switch for s in run.STAGE8_STEPS if s.name == name)
    steps = engine_config.recall.steps.model_copy(update={switch: False})
    cfg = engine_config.model_copy(
        update={"recall": engine_config.recall.model_copy(update={"steps": steps})}
    )
    eng = await open_engine(cfg)
    for i, text in enumerate(NOTES):
        await eng.remember({"content": text, "project": "p", "occurred_at": f"2024-03-0{i + 1}"})
    calls: list[str] = []
    _recording(monkeypatch, calls)
    res, stage = await _ask(eng)
    assert res.memories
    assert stage.detail[name] == f"skipped: [recall.steps] {switch} = false"
    assert calls == [n for n in NAMES if n != name]


async def test_the_steps_run_in_the_registry_s_order(stored, monkeypatch):
    calls: list[str] = []
    _recording(monkeypatch, calls)
    _, stage = await _ask(stored)
    assert calls == NAMES and list(stage.detail["steps_ms"]) == NAMES
    calls.clear()
    monkeypatch.setattr(run, "STAGE8_STEPS", tuple(reversed(run.STAGE8_STEPS)))
    _, stage = await _ask(stored)
    assert calls == NAMES[::-1] and list(stage.detail["steps_ms"]) == NAMES[::-1]


async def test_with_their_work_on_the_steps_reorder_as_they_did(stored):
    """The steps ran on this question and say what they did: its user statement above the echo,
    its days spread, the instruction brought in."""
    res, stage = await _ask(stored)
    assert stage.detail["echoes"]["moved_above"]
    assert stage.detail["coverage"]["days"] == 3
    assert stage.detail["instructions"]["applies"]
