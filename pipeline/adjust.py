"""Stage 8, scoring adjustments (time decay, priority, pinned, category, project).

A pass-through for now: the fused order is kept. A later issue adds the adjustments, each measured
on the benchmark before it is switched on.
"""

from __future__ import annotations

from datetime import datetime

from .records import Candidate


def adjust(candidates: list[Candidate], now: datetime) -> tuple[list[Candidate], str]:
    return candidates, "skipped: no adjustments configured"
