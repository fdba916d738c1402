"""Stage 8, scoring adjustments: factors on each candidate's score, then the order by the new score.

| factor | what | setting | default |
|---|---|---|---|
| ``decay`` | ``1 - share + share * 0.5 ** (age / half_life)``: only ``share`` of the score decays, so an old exact match still beats a fresh vague one; age from ``occurred_at`` (else ``created_at``) to the recall's ``reference_time``; per-category half-lives; pinned memories and memories dated after the reference time do not decay | ``[recall.decay]`` (``recall.decay = false`` switches it off) | off |
| ``priority`` | ``1 + (max_priority_boost - 1) * hot``, ``hot`` = 0.5 x (priority - 1) / 4 + 0.5 x recency of use (halves every ``access_half_life_days`` since the memory was last updated or merged); with ``access_boost``, the second half is 0.25 x access frequency (log scale, full at ``access_saturation``) + 0.25 x recency of the last use or return: at most 2x | ``recall.adjust.priority`` | on |
| ``pinned`` | 1 + ``pinned_boost`` (+10%) | ``recall.adjust.pinned_boost`` | on |
| ``category`` | 1 + ``category_boost`` x the question's match to the memory's category (``pipeline/recall/category_match.py``) | ``recall.adjust.category`` | on |
| ``project`` | a recall across projects: 1 + ``same_project`` (+30%) for ``current_project``, 1 + ``other_project`` (-20%) for the others | ``recall.adjust.same_project`` / ``other_project`` | on |

What makes a memory hot. A memory recall returned is not a memory the client used: counting
returns as use made each recall change the next ones (asking the same questions twice changed most
result lists), so by default only what the client does to a memory counts: its priority, a pin,
an ``update`` (or a merge by ``memlane maintain``). ``access_boost`` brings the returns back.

Each memory's factors are in its ``adjustments`` with ``explain=true``; the stage's trace detail
lists the factors that ran and how many candidates changed place. Access statistics are read in
one query for the candidates only (recall never writes ``memories``); recency of use is measured
by the wall clock (accesses are real events), age by the question's reference time.

A stage that reordered without scores (an LLM rerank) keeps its order: the factors then apply to
the candidates' scores re-sorted into that order, so a reranked list is only changed where the
factors disagree with it strongly.

Measured on the LoCoMo development set (offline, MiniLM; README "Scoring adjustments"): decay
lowers R@10 at every share tried, as LoCoMo asks about old sessions as often as new ones, so it
ships off; the others cannot change LoCoMo's order (one project, no priorities, pins, categories or
accesses) and tests show they order memories as specified.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from memlane.pipeline.config import AdjustConfig, DecayConfig
from memlane.pipeline.recall.category_match import match_categories
from memlane.pipeline.recall.context import AccessStats, RecallContext
from memlane.pipeline.recall.stage import Step, stage_llm
from memlane.pipeline.records import Candidate, Memory, stable_key

DAY_S = 86400.0
FACTORS = ("decay", "priority", "pinned", "category", "project")


@dataclass(slots=True)
class Inputs:
    """What the factors need besides the memory: all read before scoring, so scoring is pure."""

    reference_time: datetime  # the question's "now" (decay)
    now: datetime  # the wall clock (recency of use)
    access: dict[UUID, tuple[int, datetime | None]] = field(default_factory=dict)
    category: dict[tuple[str, str], float] = field(default_factory=dict)  # (project, category) -> 0..1
    projects: tuple[str, ...] = ()  # the projects searched (2+: the project factor applies)
    current_project: str | None = None


def active_factors(decay: DecayConfig, adj: AdjustConfig, *, spans_projects: bool) -> tuple[str, ...]:
    on = {
        "decay": decay.enabled and decay.share > 0,
        "priority": adj.priority and adj.max_priority_boost > 1.0,
        "pinned": adj.pinned_boost > 0,
        "category": adj.category and adj.category_boost > 0,
        "project": spans_projects,
    }
    return tuple(f for f in FACTORS if on[f])


def reads_access(adj: AdjustConfig, active: tuple[str, ...]) -> bool:
    """Whether stage 8 needs the candidates' access statistics: only the priority factor with
    ``access_boost`` reads them."""
    return adj.access_boost and "priority" in active


def decay_factor(m: Memory, cfg: DecayConfig, reference_time: datetime) -> float:
    """The share of the score an old memory keeps; 1.0 for pinned and future-dated memories."""
    if m.pinned:
        return 1.0
    when = m.occurred_at or m.created_at
    age_days = (reference_time - when).total_seconds() / DAY_S
    if age_days <= 0:
        return 1.0
    half_life = (
        cfg.category_half_life_days.get(m.category, cfg.half_life_days) if m.category else cfg.half_life_days
    )
    halved: float = 0.5 ** (age_days / half_life)  # (typeshed: Any for a float power; a float here)
    return 1.0 - cfg.share + cfg.share * halved


USED_AFTER_S = 1.0  # updated_at this long after created_at: changed after the write, not by it


def last_used(m: Memory) -> datetime | None:
    """When the client last changed the memory (an update, a merge), or None."""
    if (m.updated_at - m.created_at).total_seconds() > USED_AFTER_S:
        return m.updated_at
    return None


def _recency(last: datetime | None, now: datetime, half_life_days: float) -> float:
    if last is None:
        return 0.0
    idle_days = max(0.0, (now - last).total_seconds() / DAY_S)
    halved: float = 0.5 ** (idle_days / half_life_days)  # (typeshed: Any for a float power)
    return halved


def hotness(m: Memory, cfg: AdjustConfig, access: tuple[int, datetime | None] | None, now: datetime) -> float:
    """0 (priority 1, never used) to 1 (priority 5, used just now; with ``access_boost``, also
    recalled often)."""
    priority = (min(5, max(1, m.priority)) - 1) / 4
    used = last_used(m)
    if not cfg.access_boost:
        return 0.5 * priority + 0.5 * _recency(used, now, cfg.access_half_life_days)
    count, returned = access or (0, None)
    frequency = min(1.0, math.log1p(max(0, count)) / math.log1p(cfg.access_saturation))
    last = max((t for t in (used, returned) if t is not None), default=None)
    return 0.5 * priority + 0.25 * frequency + 0.25 * _recency(last, now, cfg.access_half_life_days)


def factors_of(
    m: Memory, decay: DecayConfig, adj: AdjustConfig, inputs: Inputs, active: tuple[str, ...]
) -> dict[str, float]:
    out: dict[str, float] = {}
    if "decay" in active:
        out["decay"] = decay_factor(m, decay, inputs.reference_time)
    if "priority" in active:
        hot = hotness(m, adj, inputs.access.get(m.id), inputs.now)
        out["priority"] = 1.0 + (adj.max_priority_boost - 1.0) * hot
    if "pinned" in active and m.pinned:
        out["pinned"] = 1.0 + adj.pinned_boost
    if "category" in active and m.category is not None:
        match = inputs.category.get((m.project, m.category))
        if match is not None:
            out["category"] = 1.0 + adj.category_boost * match
    if "project" in active:
        same = m.project == inputs.current_project
        out["project"] = 1.0 + (adj.same_project if same else adj.other_project)
    return out


def base_scores(candidates: list[Candidate]) -> list[float]:
    """The scores the factors apply to: the candidates' own when they are in score order (fusion,
    threshold), else the same scores sorted into the order given (a rerank that reordered), so
    the stage before keeps its say."""
    scores = [c.score for c in candidates]
    if all(a >= b for a, b in zip(scores, scores[1:], strict=False)):
        return scores
    return sorted(scores, reverse=True)


def rescore(
    candidates: list[Candidate],
    decay: DecayConfig,
    adj: AdjustConfig,
    inputs: Inputs,
    active: tuple[str, ...] | None = None,
) -> list[Candidate]:
    """New candidates with the factors applied (the input is left as it is), best first."""
    if active is None:
        active = active_factors(decay, adj, spans_projects=len(inputs.projects) > 1)
    out = []
    for c, base in zip(candidates, base_scores(candidates), strict=True):
        factors = factors_of(c.memory, decay, adj, inputs, active)
        score = base
        for f in factors.values():
            score *= f
        out.append(
            Candidate(
                memory=c.memory,
                score=score,
                arm_scores=c.arm_scores,
                base_score=base,
                adjustments={k: round(v, 4) for k, v in factors.items()},
            )
        )
    return sorted(out, key=lambda c: (-c.score, *stable_key(c.memory)))


def reads_centroids(ctx: RecallContext, active: tuple[str, ...]) -> bool:
    """Whether this stage will match categories offline (the category factor is on, no LLM rates
    them, the question was embedded): recall then starts the centroids' read before stage 5."""
    if "category" not in active or ctx.question_vector is None:
        return False
    return stage_llm(ctx, "category_match")[0] is None


async def _none() -> None:
    return None


async def _access_stats(ctx: RecallContext, candidates: list[Candidate]) -> AccessStats:
    """The candidates' access statistics: as read with the memories (recall's arms join them), and
    for any memory read without them, from the read recall started after retrieval, else now."""
    known = {
        c.memory.id: (c.memory.access_count, c.memory.last_accessed_at)
        for c in candidates
        if c.memory.access_known
    }
    missing = [c.memory.id for c in candidates if not c.memory.access_known]
    if missing:
        early = ctx.reads.access
        known.update(await (early if early is not None else ctx.store.access_stats(missing)))
    return known


async def adjust(ctx: RecallContext, candidates: list[Candidate]) -> Step[list[Candidate]]:
    req, cfg = ctx.request, ctx.config.recall
    if not req.ablation.adjustments:
        return Step(candidates, status="skipped: adjustments switched off")
    if not candidates:
        return Step(candidates, status="skipped: no candidates")
    active = active_factors(cfg.decay, cfg.adjust, spans_projects=req.spans_projects)
    if not active:
        return Step(candidates, status="skipped: no adjustments configured")
    inputs = Inputs(
        reference_time=req.reference_time,
        now=ctx.clock(),
        projects=req.searched_projects,
        current_project=req.project,
    )
    detail: dict[str, Any] = {"factors": list(active)}
    status, prompt = "ran", None
    pairs = sorted({(c.memory.project, c.memory.category) for c in candidates if c.memory.category})
    # The two reads (access statistics, category match) are independent: one round trip's wait.
    access, matched = await asyncio.gather(
        _access_stats(ctx, candidates) if reads_access(cfg.adjust, active) else _none(),
        match_categories(ctx, candidates, pairs) if "category" in active and pairs else _none(),
    )
    inputs.access = access or {}
    if matched is not None:
        inputs.category = matched.scores
        detail["category"] = {
            "implementation": matched.implementation,
            "matches": {
                f"{p}/{c}" if req.spans_projects else c: round(s, 4) for (p, c), s in matched.scores.items()
            },
            **matched.detail,
        }
        prompt = matched.prompt
        if matched.degraded:
            status = f"degraded: category_match LLM failed ({matched.degraded}); offline match used"
    if req.spans_projects:
        detail["current_project"] = req.project
    adjusted = rescore(candidates, cfg.decay, cfg.adjust, inputs, active)
    before = {c.memory.id: i for i, c in enumerate(candidates)}
    detail["moved"] = sum(1 for i, c in enumerate(adjusted) if before[c.memory.id] != i)
    return Step(adjusted, status=status, detail=detail, prompt=prompt)
