"""Retrieval arms, registered in one place: this module only declares them.

An arm says what it needs from the query, how its scores read, whether it can score any candidate
exactly, and which function runs it; retrieval (stage 4), fusion (stage 5), the relevance floor
(stage 7) and the benchmark's ablation read this registry, so adding an arm is one module plus
one line in ``REGISTRY`` (and its default weight in ``config.ARM_WEIGHTS``, which the
``recall.arm_weights`` setting is checked against).

Two kinds of arm:
- **store arms** (``run is None``) are evaluated by the store in one SQL statement per query text,
  which also scores every candidate of every store arm on every store arm; their SQL lives in
  ``store/search.py`` (``SQL_ARMS``). A store arm that needs no embedding is started while the query
  is being embedded.
- **Python arms** (``run`` or ``expand`` set; temporal, graph) run after the store arms and score
  only what they return. What such an arm reads from the question alone (the graph arm: the
  question's entities) it may start in ``prepare``, while the question is embedded. An arm that
  expands from entry points (``expand`` set, ``from_entry_points``: the graph arm) is started from
  the keyword arm's hits while the question is embedded, or from the store arms' fused best hits
  after them when the keyword arm found nothing; retrieval scores its hits the store arms did not
  return (``candidates.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from memlane.pipeline.config import ARM_WEIGHTS
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.graph import arm as graph_arm
from memlane.pipeline.recall.candidates import Expanded, Prepared, Retrieved
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.records import Memory, Query
from memlane.pipeline.time import arm as temporal_arm

# What an arm may need from the query.
NEEDS = frozenset({"text", "embedding", "time_range", "entry_points"})

# A Python arm: (recall context, query, what retrieval found so far) -> ranked (memory, score) pairs.
ArmRunner = Callable[[RecallContext, Query, Retrieved], Awaitable[list[tuple[Memory, float]]]]
# A Python arm's early reads: (recall context, query) -> what its run will need.
ArmPreparer = Callable[[RecallContext, Query], Awaitable[Prepared]]
# An arm that expands from entry points: (recall context, query, {memory id: activation in [0, 1]},
# its prepare's future or None, where the entry points came from) -> its ``ranked`` memory ids
# ([(memory id, score)], best first) and ``detail`` (the trace).
Expander = Callable[
    [RecallContext, Query, dict[UUID, float], asyncio.Future[Prepared] | None, str], Awaitable[Expanded]
]


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    needs: frozenset[str]
    exact: bool  # scores any candidate (not only its own hits): fusion can use a score below its top k
    normalise: Literal["none", "max"]  # fusion: use the score as it is, or divide by the query's best
    # A Python arm runs (``run``) or expands from entry points (``expand``); a store arm (neither) is
    # evaluated in the joint SQL statement.
    run: ArmRunner | None = None
    expand: Expander | None = None
    # A Python arm's reads that need only the question: started when retrieval starts (while the
    # question is embedded); the future is in ``Retrieved.prepared[name]``, and ``expand`` is
    # handed it.
    prepare: ArmPreparer | None = None
    description: str = ""

    def __post_init__(self) -> None:
        unknown = self.needs - NEEDS
        if unknown:
            raise ValueError(f"arm {self.name!r} needs unknown inputs {sorted(unknown)}")

    @property
    def in_store(self) -> bool:
        return self.run is None and self.expand is None

    @property
    def from_entry_points(self) -> bool:
        return self.expand is not None


VECTOR = Arm(
    "vector",
    needs=frozenset({"embedding"}),
    exact=True,
    normalise="none",  # cosine similarity is already on a fixed scale
    description="pgvector cosine similarity (HNSW) between the query's and the memory's embeddings",
)
KEYWORD = Arm(
    "keyword",
    needs=frozenset({"text"}),
    exact=True,
    normalise="max",  # BM25 has no fixed scale: 1.0 is the best keyword match of this query
    description="BM25 over PostgreSQL full-text lexemes, OR semantics",
)


TEMPORAL = Arm(
    "temporal",
    needs=frozenset({"text", "embedding", "time_range"}),
    exact=False,
    normalise="none",  # 1.0 for a memory in the question's time range: the weight is the boost
    run=temporal_arm.run,
    description="memories whose occurred_at or event time is in a time range named by the question (pipeline/time/arm.py)",
)


GRAPH = Arm(
    "graph",
    needs=frozenset({"entry_points"}),
    exact=False,
    # Activation that reached the memory, in the unit of the entry points' (fused score / best),
    # capped at 1: a weak neighbour adds little, whatever the query's best graph hit is.
    normalise="none",
    expand=graph_arm.expand,
    prepare=graph_arm.prepare,
    description="spreading activation (or meta-path forward push) over entity and memory links "
    "from the other arms' best hits and the question's entities (pipeline/graph/arm.py)",
)

REGISTRY: dict[str, Arm] = {arm.name: arm for arm in (VECTOR, KEYWORD, GRAPH, TEMPORAL)}
if list(REGISTRY) != list(ARM_WEIGHTS):  # the schema checks recall.arm_weights against these names
    raise RuntimeError(f"config.ARM_WEIGHTS names {list(ARM_WEIGHTS)}, the registry {list(REGISTRY)}")


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def resolve(selected: tuple[str, ...] | list[str] | None) -> tuple[Arm, ...]:
    """The arms to run, in registry order; an unknown name is an error, never an empty result."""
    if selected is None:
        return tuple(REGISTRY.values())
    unknown = [a for a in selected if a not in REGISTRY]
    if unknown:
        raise InvalidInput(f"unknown retrieval arm(s) {', '.join(unknown)}; known: {', '.join(REGISTRY)}")
    if not selected:
        raise InvalidInput(f"at least one retrieval arm is needed; known: {', '.join(REGISTRY)}")
    return tuple(arm for name, arm in REGISTRY.items() if name in selected)


def default_weights() -> dict[str, float]:
    return dict(ARM_WEIGHTS)
