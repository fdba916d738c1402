"""What the engine tells an observer of its work that only it sees: each LLM call (stage, provider,
outcome, time, tokens) and each embedding (passages or queries, how many, time).

A plain hook with no dependency: observers are added by the server (``server/metrics.py`` turns
these into Prometheus metrics) and nothing is recorded, nor anything imported, while there are
none. What an observer is given never holds memory text: names, counts and durations only.
"""

from __future__ import annotations

from typing import Protocol


class Observer(Protocol):
    def llm_call(
        self, stage: str, provider: str, outcome: str, seconds: float, input_tokens: int, output_tokens: int
    ) -> None:
        """One LLM call of a stage: ``outcome`` is ok, cached, error, timeout or deferred."""

    def embedded(self, kind: str, texts: int, seconds: float) -> None:
        """One call of the embedding model: ``kind`` is passages or queries."""


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
