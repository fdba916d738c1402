"""The stage contract: an optional stage that fails degrades, a required one fails the recall, and
every stage reports through its Step; the trace records each."""

from types import SimpleNamespace

import pytest

from memlane.pipeline.recall.stage import Step, run_stage
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
