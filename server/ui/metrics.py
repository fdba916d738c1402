"""Recent recalls of this process, for the stats page: a bounded ring buffer of their traces.

In memory only, by design: it answers "how fast is recall right now, and which stage is slow",
not a history. Fed by the recall explorer and by the MCP recall tool when both run in one process
(``memlane serve --transport http`` with ``[ui] enabled``).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class RecallSample:
    at: float  # time.time() when it finished
    source: str  # "ui" or "mcp"
    total_ms: float
    stages: tuple[tuple[str, float], ...]  # (stage, ms) in pipeline order


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class RecallLog:
    def __init__(self, size: int = 1000) -> None:
        self._samples: deque[RecallSample] = deque(maxlen=size)
        self._lock = threading.Lock()  # the MCP server and the UI may record from different threads

    def record(self, trace: Any, *, source: str) -> None:
        """Keep one recall's timings; ``trace`` is a records.Trace or its ``as_dict()``."""
        data = trace if isinstance(trace, dict) else trace.as_dict()
        if str(data.get("route", "")).startswith("deferred"):
            return  # a first round waiting for the client's model: not a finished recall
        sample = RecallSample(
            at=time.time(),
            source=source,
            total_ms=float(data["total_ms"]),
            stages=tuple((s["stage"], float(s["ms"])) for s in data.get("stages", [])),
        )
        with self._lock:
            self._samples.append(sample)

    def samples(self) -> list[RecallSample]:
        with self._lock:
            return list(self._samples)

    def summary(self) -> dict[str, Any]:
        """Count, p50 and p95 of the whole recall and of every stage seen, stages in the order they
        first appear (pipeline order; a stage added to the pipeline shows up by itself)."""
        samples = self.samples()
        per_stage: dict[str, list[float]] = {}
        for s in samples:
            for name, ms in s.stages:
                per_stage.setdefault(name, []).append(ms)
        totals = [s.total_ms for s in samples]

        def row(values: list[float]) -> dict[str, float]:
            return {"n": len(values), "p50": percentile(values, 50), "p95": percentile(values, 95)}

        return {
            "recalls": len(samples),
            "total": row(totals) if totals else None,
            "stages": {name: row(v) for name, v in per_stage.items()},
            "by_source": {src: sum(1 for s in samples if s.source == src) for src in ("ui", "mcp")},
        }


# The process's log: the MCP tool and the UI share it when they run in one process.
RECALLS = RecallLog()
