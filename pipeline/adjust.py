"""Stage 8, scoring adjustments (time decay, priority, pinned, category, project).

A pass-through for now: the fused order is kept. A later issue adds the adjustments, each measured
on the benchmark before it is switched on.
"""

from __future__ import annotations

from .records import Candidate
from .stage import Step


def adjust(ctx, candidates: list[Candidate]) -> Step[list[Candidate]]:
    return Step(candidates, status="skipped: no adjustments configured")
