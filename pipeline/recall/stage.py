"""The stage contract: what a recall stage receives, returns, and how it is traced.

A stage is ``fn(ctx, value) -> Step`` (sync or async). It returns its output wrapped in a ``Step``,
which may carry a status other than "ran", trace details and the prompt it used; ``run_stage``
times it, counts what went in and out, and records everything in the trace.

An optional stage (one given a ``fallback``) that raises is marked ``degraded: <why>`` and the
fallback (its input, unchanged) flows on: an LLM that times out or answers garbage costs that stage,
never the recall. A required stage that raises is marked ``failed: <why>`` and the error propagates,
with the trace so far kept on the context.

A stage may end with registered steps (``SubStep``, run by ``run_steps``: stage 8's reorderings):
each reorders the stage's output under the same contract, one by one, in the registry's order. Each
is timed, switched by its own setting, and optional: one that raises leaves the order it was given.
Their traces are details of the stage's entry: under each step's name its details when it ran, else
its status (``skipped: <why>``, ``degraded: <why>``); under ``steps_ms`` each one's time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence, Sized
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

from memlane.pipeline import telemetry
from memlane.pipeline.records import StageTrace, Trace

if TYPE_CHECKING:
    from memlane.pipeline.llm.service import LLMService, StageLLM

log = logging.getLogger(__name__)

T = TypeVar("T")
In = TypeVar("In")  # a stage's input
Out = TypeVar("Out")  # a stage's output
S = TypeVar("S", bound=Sized)  # counted with ``len`` when the stage names no count


class _Required(Enum):
    """``run_stage``'s fallback when none is given: the stage is required."""

    REQUIRED = "required"


@dataclass(slots=True)
class Step(Generic[T]):
    value: T
    status: str = "ran"  # "ran", "skipped: <why>" or "degraded: <why>"
    detail: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None  # name@vN#sha8 of the prompt an LLM stage used


# What the stage runner and the LLM lookup read of the context. The recall's ``RecallContext`` is
# the one they are given; they name only what they read, so that this module, which every stage
# imports, does not import the context (whose read-aheads import stage 9, which imports this).
class Traced(Protocol):
    @property
    def trace(self) -> Trace: ...


class WithLLM(Protocol):
    @property
    def llm(self) -> LLMService | None: ...


C = TypeVar("C", bound=Traced)  # the context a stage is run with
# A stage: (context, input) -> its output in a ``Step``, sync or async.
StageFn = Callable[[C, In], Step[Out] | Awaitable[Step[Out]]]


async def _output(fn: StageFn[C, In, Out], ctx: C, value: In) -> Step[Out]:
    """A stage function's ``Step``, whether it is sync or async."""
    ran = fn(ctx, value)
    return ran if isinstance(ran, Step) else await ran


def _mark(span: telemetry.SpanHandle, status: str) -> None:
    """A stage's or a step's status on its span: the kind, and for one that did not run its
    bounded reason (``telemetry.reason_of``)."""
    kind = status.split(":", 1)[0]
    span.set("memlane.stage.status", kind)
    if kind != "ran":
        span.set("memlane.stage.reason", telemetry.reason_of(status))


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__


@overload
async def run_stage(
    ctx: C,
    name: str,
    fn: StageFn[C, S, S],
    value: S,
    *,
    fallback: S = ...,
    detail: dict[str, Any] | None = None,
) -> S: ...
@overload
async def run_stage(
    ctx: C,
    name: str,
    fn: StageFn[C, T, T],
    value: T,
    *,
    count: Callable[[T], int],
    fallback: T = ...,
    detail: dict[str, Any] | None = None,
) -> T: ...
@overload
async def run_stage(
    ctx: C,
    name: str,
    fn: StageFn[C, In, S],
    value: In,
    *,
    count_in: int,
    fallback: S = ...,
    detail: dict[str, Any] | None = None,
) -> S: ...
@overload
async def run_stage(
    ctx: C,
    name: str,
    fn: StageFn[C, In, Out],
    value: In,
    *,
    count_in: int,
    count: Callable[[Out], int],
    fallback: Out = ...,
    detail: dict[str, Any] | None = None,
) -> Out: ...
async def run_stage(
    ctx: C,
    name: str,
    fn: StageFn[C, In, Out],
    value: In,
    *,
    count_in: int | None = None,
    # Counts the output, and the input when ``count_in`` is not given (the overloads above: then
    # the input and the output are of one type); ``len`` by default (then they are sized).
    count: Callable[[Any], int] = len,
    fallback: Out | _Required = _Required.REQUIRED,
    detail: dict[str, Any] | None = None,
) -> Out:
    """Run one stage on ``value`` and record it in ``ctx.trace``; returns the stage's output."""
    st = StageTrace(
        stage=name,
        ms=0.0,
        count_in=count(value) if count_in is None else count_in,
        count_out=0,
        status="ran",
        detail=dict(detail or {}),
    )
    with telemetry.span(f"recall.{name}", **{"memlane.stage.in": st.count_in}) as span:
        t0 = time.perf_counter()
        try:
            step = await _output(fn, ctx, value)
            st.status = step.status
            st.detail.update(step.detail)
            if step.prompt:
                st.detail["prompt"] = step.prompt
            out = step.value
        except Exception as e:
            st.detail["error"] = _reason(e)
            if fallback is _Required.REQUIRED:
                st.status = f"failed: {_reason(e)}"
                raise
            log.warning("recall stage %s degraded: %s", name, _reason(e), exc_info=True)
            st.status = f"degraded: {_reason(e)}"
            out = fallback
        finally:
            st.ms = (time.perf_counter() - t0) * 1000
            ctx.trace.stages.append(st)
            _mark(span, st.status)
        st.count_out = count(out)
        span.set("memlane.stage.out", st.count_out)
    return out


@dataclass(frozen=True, slots=True)
class SubStep(Generic[C, T]):
    """A registered step of a stage: ``fn`` reorders the stage's output (a stage function whose
    input and output are of one type), ``switch`` names its setting in the switches ``run_steps`` is
    given, and ``on_empty`` lets it run on an empty output (one that can bring memories in)."""

    name: str
    fn: StageFn[C, T, T]
    switch: str
    on_empty: bool = False


async def run_steps(
    ctx: C,
    stage: str,
    steps: Sequence[SubStep[C, S]],
    step: Step[S],
    *,
    switches: object,
    section: str,
) -> Step[S]:
    """Run ``steps`` in order on the output of stage ``stage`` (``step``, updated and returned);
    ``switches`` holds each step's boolean setting, named ``section`` in the trace."""
    times: dict[str, float] = step.detail.setdefault("steps_ms", {})
    for sub in steps:
        if not getattr(switches, sub.switch):
            step.detail[sub.name] = f"skipped: {section} {sub.switch} = false"
            continue
        if not sub.on_empty and not len(step.value):
            step.detail[sub.name] = "skipped: no candidates"
            continue
        with telemetry.span(f"recall.{stage}.{sub.name}") as span:
            t0 = time.perf_counter()
            try:
                done = await _output(sub.fn, ctx, step.value)
                status = done.status
            except Exception as e:
                # The type only in the log: a step's error may quote a memory.
                log.warning("recall stage %s: step %s degraded: %s", stage, sub.name, type(e).__name__)
                status = f"degraded: {_reason(e)}"
                step.detail[sub.name] = status
            else:
                step.detail[sub.name] = done.detail if status == "ran" else status
                if status == "ran":
                    step.value = done.value
                    if step.status.startswith("skipped"):
                        step.status = "ran"  # the stage's own work was off, a step's was not
            finally:
                times[sub.name] = round((time.perf_counter() - t0) * 1000, 3)
            _mark(span, status)
    return step


def cancel_all(futures: Iterable[asyncio.Future[Any] | None]) -> None:
    """Cancel work a recall started and no longer needs; of any that had already finished, collect
    the exception (raised where it was awaited, or not needed: the recall ended first), so none is
    reported as never retrieved."""
    for f in futures:
        if f is None:
            continue
        f.cancel()
        if f.done() and not f.cancelled():
            f.exception()


def stage_llm(ctx: WithLLM, stage: str) -> tuple[StageLLM | None, str]:
    """(the stage's LLM or None, why not): no provider, the stage switched off, or no sampling."""
    if ctx.llm is None:
        return None, "no LLM provider"
    return ctx.llm.stage(stage)
