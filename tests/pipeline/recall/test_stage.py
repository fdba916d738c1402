"""The stage contract: an optional stage that fails degrades, a required one fails the recall, and
every stage reports through its Step; the trace records each."""

from types import SimpleNamespace

import pytest

from memlane.pipeline.recall.stage import Step, SubStep, run_stage, run_steps
from memlane.pipeline.records import Trace

pytestmark = pytest.mark.anyio


def ctx(**kw):
    return SimpleNamespace(trace=Trace(), **kw)


async def test_an_optional_stage_that_raises_is_degraded_and_its_input_flows_on():
    c = ctx()

    def broken(_, value):
        raise TimeoutError("the provider did not answer in 8 s")

    out = await run_stage(c, "rerank", broken, [1, 2, 3], fallback=[1, 2, 3])
    assert out == [1, 2, 3]
    [st] = c.trace.stages
    assert st.status == "degraded: TimeoutError: the provider did not answer in 8 s"
    assert (st.count_in, st.count_out) == (3, 3)


async def test_a_required_stage_that_raises_fails_the_recall_but_keeps_the_trace():
    c = ctx()

    async def broken(_, value):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await run_stage(c, "retrieval", broken, [1])
    assert c.trace.stages[0].status == "failed: RuntimeError: boom"


async def test_a_stage_reports_its_status_detail_and_prompt_through_its_step():
    c = ctx()
    out = await run_stage(
        c,
        "intent",
        lambda _, v: Step(v[:1], status="ran", detail={"x": 1}, prompt="intent@v1#0123abcd"),
        [1, 2],
    )
    assert out == [1]
    st = c.trace.stages[0]
    assert st.detail == {"x": 1, "prompt": "intent@v1#0123abcd"} and (st.count_in, st.count_out) == (2, 1)


def _steps(*names, on_empty=()):
    """Registered steps that each append their name to the value (a list) and record the call."""
    calls = []

    def step(name):
        def fn(_, value):
            calls.append(name)
            return Step([*value, name], detail={"seen": len(value)})

        return SubStep(name, fn, switch=f"{name}_on", on_empty=name in on_empty)

    return [step(n) for n in names], calls


async def test_steps_run_in_the_registry_s_order_each_timed_and_traced_under_its_name():
    steps, calls = _steps("a", "b", "c")
    on = SimpleNamespace(a_on=True, b_on=True, c_on=True)
    out = await run_steps(ctx(), "adjustments", steps, Step([0]), switches=on, section="[s]")
    assert calls == ["a", "b", "c"] and out.value == [0, "a", "b", "c"]
    assert [out.detail[n] for n in "abc"] == [{"seen": 1}, {"seen": 2}, {"seen": 3}]
    assert list(out.detail["steps_ms"]) == ["a", "b", "c"]
    assert all(ms >= 0 for ms in out.detail["steps_ms"].values())
    steps.reverse()
    out = await run_steps(ctx(), "adjustments", steps, Step([0]), switches=on, section="[s]")
    assert out.value == [0, "c", "b", "a"]


async def test_a_step_that_raises_degrades_alone_and_leaves_the_order_it_was_given():
    steps, calls = _steps("a", "c")

    async def broken(_, value):
        raise RuntimeError("no answer")

    steps.insert(1, SubStep("b", broken, switch="b_on"))
    on = SimpleNamespace(a_on=True, b_on=True, c_on=True)
    out = await run_steps(ctx(), "adjustments", steps, Step([0]), switches=on, section="[s]")
    assert out.value == [0, "a", "c"] and calls == ["a", "c"]
    assert out.detail["b"] == "degraded: RuntimeError: no answer"
    assert out.detail["c"] == {"seen": 2} and out.status == "ran"


async def test_a_step_switched_off_is_skipped_and_says_which_switch():
    steps, calls = _steps("a", "b")
    on = SimpleNamespace(a_on=False, b_on=True)
    out = await run_steps(ctx(), "adjustments", steps, Step([0]), switches=on, section="[recall.steps]")
    assert calls == ["b"] and out.value == [0, "b"]
    assert out.detail["a"] == "skipped: [recall.steps] a_on = false"


async def test_only_a_step_that_can_bring_memories_in_runs_on_no_candidates():
    steps, calls = _steps("a", "b", on_empty=("b",))
    on = SimpleNamespace(a_on=True, b_on=True)
    out = await run_steps(
        ctx(), "adjustments", steps, Step([], status="skipped: x"), switches=on, section="[s]"
    )
    assert calls == ["b"] and out.detail["a"] == "skipped: no candidates"
    assert out.value == ["b"] and out.status == "ran"  # a step that ran makes the stage's work ran


async def test_a_step_s_own_skip_leaves_the_value_and_is_its_trace():
    def skips(_, value):
        return Step(value[:0], status="skipped: not an overview question")

    out = await run_steps(
        ctx(),
        "adjustments",
        [SubStep("s", skips, switch="on")],
        Step([1]),
        switches=SimpleNamespace(on=True),
        section="[s]",
    )
    assert out.value == [1] and out.detail["s"] == "skipped: not an overview question"
