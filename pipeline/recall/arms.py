"""Retrieval arms, registered in one place.

An arm says what it needs from the query, how its scores read, and whether it can score any
candidate exactly; retrieval (stage 4), fusion (stage 5), the relevance floor (stage 7), the
``recall.arm_weights`` setting and the benchmark's ablation all read this registry, so adding an
arm is one module plus one line in ``REGISTRY``.

Two kinds of arm:
- **store arms** (``run is None``) are evaluated by the store in one SQL statement per query text,
  which also scores every candidate of every store arm on every store arm; their SQL lives in
  ``store/search.py`` (``SQL_ARMS``). A store arm that needs no embedding is started while the query
  is being embedded.
- **Python arms** (``run`` set; graph, temporal) run after the store arms, with their hits as
  entry points, and score only what they return. What such an arm reads from the question alone
  (the graph arm: the question's entities) it may start in ``prepare``, while the question is
  embedded; an arm that can start from the keyword arm's hits (``early``: the graph arm) runs
  while the question is embedded too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from memlane.pipeline.errors import InvalidInput

if TYPE_CHECKING:
    from memlane.pipeline.records import Memory

# What an arm may need from the query.
NEEDS = frozenset({"text", "embedding", "time_range", "entry_points"})

# A Python arm: (recall context, query, hits of the store arms) -> ranked (memory, score) pairs.
ArmRunner = Callable[[Any, Any, Any], Awaitable[list[tuple["Memory", float]]]]
# A Python arm's early reads: (recall context, query) -> what its run will need.
ArmPreparer = Callable[[Any, Any], Awaitable[Any]]
# (recall context, query, {memory id: score over the best, in [0, 1]}, its prepare's awaitable or
# None) -> an object with ``ranked`` ([(memory id, score)], best first) and ``detail`` (the trace);
# retrieval scores the hits the store arms did not return and makes them the arm's list.
EarlyRunner = Callable[[Any, Any, dict, Any], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Arm:
    name: str
    needs: frozenset[str]
    exact: bool  # scores any candidate (not only its own hits): fusion can use a score below its top k
    normalise: Literal["none", "max"]  # fusion: use the score as it is, or divide by the query's best
    default_weight: float = 1.0
    run: ArmRunner | None = None  # None: a store arm, evaluated in the joint SQL statement
    # A Python arm's reads that need only the question: started when retrieval starts (while the
    # question is embedded); ``run`` finds the awaitable in ``Retrieved.prepared[name]``.
    prepare: ArmPreparer | None = None
    # A Python arm that can start from the hits of the store arms that need no embedding (keyword)
    # runs while the question is embedded, instead of after every store arm (``run`` is then only
    # for a recall where those found nothing): see ``EarlyRunner``.
    early: EarlyRunner | None = None
    description: str = ""

    def __post_init__(self) -> None:
        unknown = self.needs - NEEDS
        if unknown:
            raise ValueError(f"arm {self.name!r} needs unknown inputs {sorted(unknown)}")

    @property
    def in_store(self) -> bool:
        return self.run is None


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


async def _temporal(ctx, query, found):
    from memlane.pipeline.time.arm import run

    return await run(ctx, query, found)


TEMPORAL = Arm(
    "temporal",
    needs=frozenset({"text", "embedding", "time_range"}),
    exact=False,
    normalise="none",  # 1.0 for a memory in the question's time range: the weight is the boost
    default_weight=0.35,
    run=_temporal,
    description="memories whose occurred_at is in a time range named by the question (pipeline/time/arm.py)",
)


async def _graph(ctx, query, retrieved):
    from memlane.pipeline.graph import arm as graph

    return await graph.run(ctx, query, retrieved)


async def _graph_prepare(ctx, query):
    from memlane.pipeline.graph import arm as graph

    return await graph.prepare(ctx, query)


async def _graph_early(ctx, query, seeds, looked_up):
    from memlane.pipeline.graph import arm as graph

    return await graph.expand(ctx, query, seeds, looked_up, "keyword")


GRAPH = Arm(
    "graph",
    needs=frozenset({"entry_points"}),
    exact=False,
    # Activation that reached the memory, in the unit of the entry points' (fused score / best),
    # capped at 1: a weak neighbour adds little, whatever the query's best graph hit is.
    normalise="none",
    default_weight=0.5,
    run=_graph,
    prepare=_graph_prepare,
    early=_graph_early,
    description="spreading activation (or meta-path forward push) over entity and memory links "
    "from the other arms' best hits and the question's entities (pipeline/graph/arm.py)",
)

REGISTRY: dict[str, Arm] = {arm.name: arm for arm in (VECTOR, KEYWORD, GRAPH, TEMPORAL)}


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
    return {name: arm.default_weight for name, arm in REGISTRY.items()}
