"""Retrieval methods for the ablation: each arm alone, combinations, and the full pipeline.

The list is derived from what the pipeline offers, so a new arm (graph, temporal) or a new switch
(scoring adjustments on/off) appears in the ablation table without touching the benchmark:

- every arm of the registry (``pipeline/recall/arms.py``) alone;
- with three or more arms, every "all but one" combination (what each arm adds to the others);
- ``fused``: every arm, fused (the default pipeline);
- for each switch of ``Ablation`` (``pipeline/recall/query.py``: a part of recall that can be
  switched off), ``fused`` with the switch off;
- for each entry of ``CONFIG_VARIANTS`` that the recall config accepts and that differs from the
  configured value, ``fused`` with that recall setting (e.g. RRF instead of score fusion).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from memlane.pipeline.config import RecallConfig
from memlane.pipeline.recall import arms as arm_registry
from memlane.pipeline.recall.query import Ablation

# The switches of ``Ablation``: its fields that are on by default (a part of recall it can turn off).
SWITCHES = tuple(f.name for f in dataclasses.fields(Ablation) if f.default is True)
# Method-name suffix -> recall config overrides; skipped when a field does not exist (any more).
CONFIG_VARIANTS: dict[str, dict[str, Any]] = {
    "no-neighbour-lift": {"neighbour_lift": 0.0},
    "neighbour-lift-0.15": {"neighbour_lift": 0.15},
    "neighbour-lift-0.6": {"neighbour_lift": 0.6},
    "neighbour-window-1": {"neighbour_window": 1},
    "rrf": {"fusion": "rrf"},
    "rrf-vector": {"fusion": "rrf_vector"},
    # The graph arm's two algorithms (the configured one is "fused"; "fused-no-graph" is it off).
    "graph-activation": {"graph": "activation"},
    "graph-mpfp": {"graph": "mpfp"},
    # Every part of stage 7 off: cosine >= -1 always holds.
    "no-threshold": {
        "min_similarity": -1.0,
        "semantic_min_similarity": -1.0,
        "word_min_similarity": -1.0,
        "relative_floor": 0.0,
    },
}


@dataclass(frozen=True)
class Method:
    name: str
    arms: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)  # Ablation switches, off
    recall_config: dict[str, Any] = field(default_factory=dict)  # RecallConfig overrides

    def ablation(self) -> Ablation:
        return Ablation(arms=self.arms, **self.options)

    def describe(self) -> dict[str, Any]:
        return {
            "arms": list(self.arms),
            "options": dict(self.options),
            "recall_config": dict(self.recall_config),
        }


def default_method(arms: tuple[str, ...] | None = None) -> Method:
    """The pipeline as a user gets it: every arm, every stage at its default."""
    return Method("fused", tuple(arms or arm_registry.names()))


def ablation_methods(engine=None, arms: tuple[str, ...] | None = None) -> list[Method]:
    """Single arms, leave-one-out combinations (3+ arms), the full fusion, switched-off stages and
    other recall settings."""
    if arms is None:  # the arms fusion weighs: one weighted 0 is already ablated by the config
        weights = engine.config.recall.arm_weights if engine is not None else arm_registry.default_weights()
        arms = tuple(a for a in arm_registry.names() if weights.get(a, 0.0) > 0)
    out = [Method(a, (a,)) for a in arms]
    if len(arms) > 2:
        out += [Method(f"fused-no-{a}", tuple(x for x in arms if x != a)) for a in arms]
    full = default_method(arms)
    out.append(full)
    for switch in SWITCHES:
        out.append(Method(f"fused-no-{switch}", full.arms, options={switch: False}))
    config = getattr(engine, "config", None)
    current = config.recall if config is not None else RecallConfig()
    for suffix, overrides in CONFIG_VARIANTS.items():
        if _valid_change(current, overrides):
            out.append(Method(f"fused-{suffix}", full.arms, recall_config=overrides))
    return out


def _valid_change(current: RecallConfig, overrides: dict[str, Any]) -> bool:
    if any(k not in RecallConfig.model_fields or getattr(current, k) == v for k, v in overrides.items()):
        return False
    try:
        RecallConfig.model_validate({**current.model_dump(), **overrides})
    except ValidationError:
        return False
    return True


@contextmanager
def recall_settings(engine, overrides: dict[str, Any]):
    """Run with other recall settings, then restore them (the bench recalls one at a time)."""
    if not overrides:
        yield
        return
    old = engine.config
    recall = RecallConfig.model_validate({**old.recall.model_dump(), **overrides})
    engine.config = old.model_copy(update={"recall": recall})
    try:
        yield
    finally:
        engine.config = old
