"""What the engine tells an observer of its work that only it sees: each LLM call (stage, provider,
outcome, time, tokens) and each embedding (memories or queries, how many, time); and, when traces
are on, spans around its stages, steps and statements.

A plain hook with no dependency: observers are added by the server (``server/metrics.py`` turns
these into Prometheus metrics) and nothing is recorded, nor anything imported, while there are
none. What an observer is given never holds memory text: names, counts and durations only.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol


class Observer(Protocol):
    def llm_call(
        self, stage: str, provider: str, outcome: str, seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        """One LLM call of a stage: ``outcome`` is ok, cached, error, timeout or deferred."""

    def embedded(self, kind: str, texts: int, seconds: float) -> None:
        """One call of the embedding model: ``kind`` is "passages" (memories,
        the label the metrics have always had) or "queries"."""


_observers: tuple[Observer, ...] = ()


def add(observer: Observer) -> None:
    global _observers
    if observer not in _observers:
        _observers = (*_observers, observer)


def remove(observer: Observer) -> None:
    global _observers
    _observers = tuple(o for o in _observers if o is not observer)


def observing() -> bool:
    return bool(_observers)


def llm_call(
    stage: str, provider: str, outcome: str, seconds: float, input_tokens: int = 0, output_tokens: int = 0
) -> None:
    for o in _observers:
        o.llm_call(stage, provider, outcome, seconds, input_tokens, output_tokens)


def embedded(kind: str, texts: int, seconds: float) -> None:
    for o in _observers:
        o.embedded(kind, texts, seconds)


# -- traces ------------------------------------------------------------------------------------------
# Spans around the recall stages, the write path's steps and the store's statements, when the server
# has configured OpenTelemetry (server/tracing.py); otherwise ``span`` is a shared no-op context.
# Attributes are names, counts and memlane's own SQL: never memory text, a query or a parameter.


class SpanHandle(Protocol):
    def set(self, key: str, value: str | int | float | bool) -> None: ...


class Tracer(Protocol):
    def span(
        self, name: str, attributes: dict[str, str | int | float | bool]
    ) -> AbstractContextManager[SpanHandle]: ...


class _NoSpan:
    def set(self, key: str, value: str | int | float | bool) -> None:
        pass


_NO_SPAN = nullcontext(_NoSpan())
_tracer: Tracer | None = None


def set_tracer(tracer: Tracer | None) -> None:
    global _tracer
    _tracer = tracer


def tracing() -> bool:
    return _tracer is not None


def span(name: str, **attributes: str | int | float | bool) -> AbstractContextManager[SpanHandle]:
    """``with span("recall.fusion", **{"memlane.stage.in": 40}) as s: ... s.set(...)``."""
    if _tracer is None:
        return _NO_SPAN
    return _tracer.span(name, attributes)


def reason_of(status: str) -> str:
    """The first words of a "skipped: why" or "degraded: why" status, without numbers or anything
    after a colon, a parenthesis or a semicolon (an exception's text, a count): a bounded value for
    a metric's label or a span's attribute."""
    why = status.split(":", 1)[1] if ":" in status else status
    why = re.split(r"[(:;,]", why, maxsplit=1)[0]
    why = re.sub(r"\s+", " ", re.sub(r"[0-9.]+", "", why)).strip().lower()
    return why[:48] or "unspecified"
