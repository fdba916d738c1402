"""The stage contract: what a recall stage receives, returns, and how it is traced.

A stage is ``fn(ctx, value) -> Step | value`` (sync or async). It returns its output, optionally
wrapped in a ``Step`` that carries a status other than "ran", trace details and the prompt it used;
``run_stage`` times it, counts what went in and out, and records everything in the trace.

An optional stage (one given a ``fallback``) that raises is marked ``degraded: <why>`` and the
fallback (its input, unchanged) flows on: an LLM that times out or answers garbage costs that stage,
never the recall. A required stage that raises is marked ``failed: <why>`` and the error propagates,
with the trace so far kept on the context.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from memlane.pipeline.records import StageTrace

log = logging.getLogger(__name__)

T = TypeVar("T")
_REQUIRED = object()


@dataclass(slots=True)
class Step(Generic[T]):
    value: T
    status: str = "ran"  # "ran", "skipped: <why>" or "degraded: <why>"
    detail: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None  # name@vN#sha8 of the prompt an LLM stage used


def _reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:300] if text else type(e).__name__


async def run_stage(
    ctx,
    name: str,
    fn: Callable[..., Any],
    value: Any,
    *,
    count_in: int | None = None,
    count: Callable[[Any], int] = len,
    fallback: Any = _REQUIRED,
    detail: dict[str, Any] | None = None,
) -> Any:
    """Run one stage on ``value`` and record it in ``ctx.trace``; returns the stage's output."""
    st = StageTrace(
        stage=name,
        ms=0.0,
        count_in=count(value) if count_in is None else count_in,
        count_out=0,
        status="ran",
        detail=dict(detail or {}),
    )
    t0 = time.perf_counter()
    try:
        out = fn(ctx, value)
        if inspect.isawaitable(out):
            out = await out
        if isinstance(out, Step):
            st.status = out.status
            st.detail.update(out.detail)
            if out.prompt:
                st.detail["prompt"] = out.prompt
            out = out.value
    except Exception as e:
        st.detail["error"] = _reason(e)
        if fallback is _REQUIRED:
            st.status = f"failed: {_reason(e)}"
            raise
        log.warning("recall stage %s degraded: %s", name, _reason(e), exc_info=True)
        st.status = f"degraded: {_reason(e)}"
        out = fallback
    finally:
        st.ms = (time.perf_counter() - t0) * 1000
        ctx.trace.stages.append(st)
    st.count_out = count(out)
    return out


def cancel_all(futures) -> None:
    """Cancel work a recall started and no longer needs; of any that had already finished, collect
    the exception (raised where it was awaited, or not needed: the recall ended first), so none is
    reported as never retrieved."""
    for f in futures:
        if f is None:
            continue
        f.cancel()
        if f.done() and not f.cancelled():
            f.exception()


def stage_llm(ctx, stage: str):
    """(the stage's LLM or None, why not): no provider, the stage switched off, or no sampling."""
    if ctx.llm is None:
        return None, "no LLM provider"
    return ctx.llm.stage(stage)
