"""``memlane bench locomo --adjust-variants``: the scoring adjustments (stage 8) measured factor by
factor on the same retrieved candidates.

Stage 8 is a pure function of stage 7's candidates and a few inputs (``pipeline/recall/adjust.py``), so
each variant re-scores the default run's candidates (their ``base_score``, the score before stage
8) instead of recalling again: one LoCoMo run measures every variant. The inputs are what the
benchmark's store holds: no access statistics (the bench's recalls count none), the
memories' own priority, pins and categories, and one project per recall.
"""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace

from memlane.pipeline.config import AdjustConfig, DecayConfig
from memlane.pipeline.recall import adjust
from memlane.pipeline.records import Candidate, stable_key

DECAY_SHARES = (0.05, 0.1, 0.2, 0.3, 0.5)
DECAY_HALF_LIVES = (90.0, 365.0)


def variants(
    cfg_decay: DecayConfig, cfg_adjust: AdjustConfig
) -> dict[str, tuple[DecayConfig, AdjustConfig, tuple]]:
    """name -> (decay settings, other settings, active factors)."""
    out: dict[str, tuple[DecayConfig, AdjustConfig, tuple]] = {"none": (cfg_decay, cfg_adjust, ())}
    for share in DECAY_SHARES:
        d = cfg_decay.model_copy(update={"enabled": True, "share": share, "half_life_days": 30.0})
        out[f"decay share={share} half-life=30d"] = (d, cfg_adjust, ("decay",))
    for hl in DECAY_HALF_LIVES:
        d = cfg_decay.model_copy(update={"enabled": True, "share": 0.2, "half_life_days": hl})
        out[f"decay share=0.2 half-life={hl:g}d"] = (d, cfg_adjust, ("decay",))
    for factor in ("priority", "pinned", "category"):
        out[factor] = (cfg_decay, cfg_adjust, (factor,))
    configured = adjust.active_factors(cfg_decay, cfg_adjust, spans_projects=False)
    out["configured: " + ("+".join(configured) or "none")] = (cfg_decay, cfg_adjust, configured)
    with_decay = cfg_decay.model_copy(update={"enabled": True})
    out[f"configured + decay share={with_decay.share}"] = (
        with_decay,
        cfg_adjust,
        adjust.active_factors(with_decay, cfg_adjust, spans_projects=False),
    )
    return out


def before_stage_8(ranked: list[Candidate]) -> list[Candidate]:
    """Stage 7's candidates, in its order, with its scores (stage 8 keeps them as ``base_score``)."""
    plain = [
        Candidate(
            memory=c.memory,
            score=c.base_score if c.base_score is not None else c.score,
            arm_scores=c.arm_scores,
        )
        for c in ranked
    ]
    return sorted(plain, key=lambda c: (-c.score, *stable_key(c.memory)))


def rescored(result, req, table, category: dict | None = None) -> dict[str, SimpleNamespace]:
    """Each variant's ranked list, as a result-like object for the scorer."""
    base = before_stage_8(result.ranked)
    inputs = adjust.Inputs(
        reference_time=req.reference_time,
        now=datetime.now(UTC),
        category=category or {},
        projects=req.searched_projects,
        current_project=req.project,
    )
    return {
        name: SimpleNamespace(ranked=adjust.rescore(base, decay, adj, inputs, active))
        for name, (decay, adj, active) in table.items()
    }
