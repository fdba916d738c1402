"""The graph arm (stage 4): memories connected to the best hits of the other arms, and to the
entities the question names, through the links of the write path (``store/graph.py``).

Two algorithms (``recall.graph``), both bounded by the recall ``budget`` (``graph.expand_low`` /
``expand_mid`` / ``expand_high`` nodes expanded), both reported in the retrieval stage's
``detail.graph`` (entry points, nodes expanded, the bound, queries):

- ``activation``: spreading activation (``mpfp`` is the default: it measured better on LoCoMo). The entry points (the top ``graph.entry_points`` fused hits
  of the store arms, activation = their fused score over the best one, and the question's entities,
  activation 1) spread activation to their neighbours, ``graph.decay`` kept per hop, links weighted
  by kind (relates_to by its similarity, next/previous 0.9, same_time 0.5, causes x
  ``graph.causes_boost``); an entity passes activation on divided by the square root of its number
  of mentions, and one mentioned more than ``graph.max_entity_degree`` times is not expanded (the
  user's own name says nothing). The neighbourhood (links and mentions of the entry points, then
  the memories of their entities) is loaded in two rounds of queries and the spreading runs over a
  networkx graph, most active node first, until the budget of expansions is spent. A memory's score
  is the activation it received from other nodes, so an entry point connected to other good hits
  scores too.
- ``mpfp``: meta-path forward push. For each typed path (memory -> entity -> memory,
  memory -relates_to-> memory, memory -next/previous-> memory, twice), a forward push from the entry
  points along the path's link types, edges loaded per hop for the frontier only: each node pushed
  from keeps ``PUSH_ALPHA`` of its mass and passes the rest to its neighbours in proportion to the
  link weights, never back to the entry point (or question entity) the mass came from. A memory's
  score is the mass it holds, summed over the paths.

The scale, the same for both algorithms (fusion uses it as it is, ``normalise = "none"``): an
entry point enters with its activation (fused score over the best, in [0, 1]), a question entity
with 1, and a memory's score is the activation that reached it, capped at 1. So a neighbour of a weak entry point gets less than a
neighbour of a strong one, a memory several paths agree on gets more than one reached once, and
the graph adds its full weight (``recall.arm_weights.graph``) only for full-strength evidence, not
for whatever is this query's best graph hit. An entry point scores only what other entry points
push to it.

The arm scores only its own hits. Hits the store arms did not return are scored on them exactly
(``Store.search`` with the ids), so fusion and the relevance floor treat them like any candidate.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import networkx as nx

from . import entities as entity_extractor
from .records import Memory, stable_key

KIND_WEIGHT = {"relates_to": None, "next": 0.9, "previous": 0.9, "same_time": 0.5, "causes": 1.0}
META_PATHS: dict[str, tuple[str, ...]] = {
    "entity": ("mention", "member"),
    "relates_to": ("relates_to",),
    "next": ("next",),
    "next2": ("next", "next"),
}
PUSH_ALPHA = 0.15  # forward push: share of residual a node keeps before pushing the rest on
PUSH_EPSILON = 1e-4


def _entry_points(ctx, retrieved) -> dict[UUID, float]:
    """The top fused hits of the store arms, activation = fused score / best fused score."""
    from .fuse import score_fusion

    if not retrieved.scores:
        return {}
    weights = {a: w for a, w in ctx.config.recall.arm_weights.items() if a != "graph"}
    fused = score_fusion(retrieved, weights)[: ctx.config.graph.entry_points]
    best = max((c.score for c in fused), default=0.0)
    if best <= 0:
        return {}
    return {c.memory.id: max(c.score / best, 0.0) for c in fused}


def _query_keys(query) -> list[str]:
    names = list(query.intent.entities) if query.intent is not None else []
    if not names:
        names = [e.name for e in entity_extractor.extract(query.text)]
    keys = [entity_extractor.normalise(n) for n in names]
    return sorted({k for k in keys if k})


def _link_weight(kind: str, weight: float, causes_boost: float) -> float:
    base = KIND_WEIGHT.get(kind)
    w = weight if base is None else base
    return w * causes_boost if kind == "causes" else w


class _Loader:
    """Neighbourhood reads of one recall. A hop asked twice for the same frontier (the ``next`` and
    ``next2`` paths both start from the entry points) is read once, even when the asks overlap."""

    def __init__(self, store, project: str, cfg) -> None:
        self.store, self.project, self.cfg = store, project, cfg
        self.queries = 0
        self._hops: dict[tuple, asyncio.Future] = {}
        # Counting an entity's mentions past this says nothing more: it is not expanded.
        self._count_up_to = cfg.max_entity_degree + 1

    async def edges(self, ids: list[UUID], kinds: tuple[str, ...]):
        self.queries += 1
        return await self.store.memory_edges(ids, kinds, per_node=self.cfg.per_node)

    async def mentions(self, ids: list[UUID]):
        self.queries += 1
        return await self.store.mentions_of(ids, self._count_up_to)

    async def members(self, entity_ids: list[int]):
        self.queries += 1
        return await self.store.entity_members(entity_ids, self.cfg.per_node, self.project, self._count_up_to)

    async def query_entities(self, keys: list[str]) -> dict[int, str]:
        if not keys:
            return {}
        self.queries += 1
        return await self.store.entity_ids(self.project, keys)

    async def hop(self, step: str, frontier: dict) -> dict[Any, list[tuple[Any, float]]]:
        key = (step, frozenset(frontier))
        if key not in self._hops:
            self._hops[key] = asyncio.ensure_future(_hop(self, step, frontier))
        return await asyncio.shield(self._hops[key])

    def cancel(self) -> None:
        for f in self._hops.values():
            f.cancel()


async def _resolved(value):
    """A value that may still be an awaitable (the question's entities, looked up concurrently)."""
    return value if isinstance(value, dict) else await value


async def spreading_activation(
    loader: _Loader, seeds: dict[UUID, float], query_entities, budget: int, cfg
) -> tuple[dict[UUID, float], dict[str, Any]]:
    """Activation received by each memory node, and what the run did. ``query_entities`` may be
    an awaitable: it is looked up while the entry points' neighbourhood is read."""
    g = nx.Graph()
    seed_ids = sorted(seeds, key=str)
    edges, mentions, query_entities = await asyncio.gather(
        loader.edges(seed_ids, ("relates_to", "next", "same_time", "causes")),
        loader.mentions(seed_ids),
        _resolved(query_entities),
    )
    for a, b, kind, w in edges:
        weight = _link_weight(kind, w, cfg.causes_boost)
        if g.has_edge(("m", a), ("m", b)):
            weight = max(weight, g.edges[("m", a), ("m", b)]["weight"])
        g.add_edge(("m", a), ("m", b), weight=weight, kind=kind)
    degree: dict[int, int] = {}
    for m, e, n in mentions:
        degree[e] = n
        g.add_edge(("m", m), ("e", e), weight=1.0, kind="mention")
    for e in query_entities:
        g.add_node(("e", e))
    expandable = sorted(
        {e for e, n in degree.items() if n <= cfg.max_entity_degree and n > 1} | set(query_entities)
    )
    for e, m, n in await loader.members(expandable):
        degree[e] = n
        if n <= cfg.max_entity_degree:  # a hub (a speaker's own name) says nothing, asked about or not
            g.add_edge(("e", e), ("m", m), weight=1.0, kind="mention")

    activation: dict[tuple, float] = defaultdict(float)
    received: dict[tuple, float] = defaultdict(float)
    for mid, a in seeds.items():
        activation[("m", mid)] = a
    for e in query_entities:
        activation[("e", e)] = 1.0
    heap = [(-a, str(node[1]), node) for node, a in activation.items()]
    heapq.heapify(heap)
    expanded: set[tuple] = set()
    while heap and len(expanded) < budget:
        _, _, node = heapq.heappop(heap)
        if node in expanded or node not in g:
            continue
        if node[0] == "e" and degree.get(node[1], 0) > cfg.max_entity_degree:
            continue
        expanded.add(node)
        a = activation[node]
        spread = a * cfg.decay
        if node[0] == "e":
            spread /= math.sqrt(max(degree.get(node[1], 1), 1))
        for nb in g.neighbors(node):
            gain = spread * g.edges[node, nb]["weight"]
            if gain <= 0:
                continue
            received[nb] += gain
            activation[nb] += gain
            if nb not in expanded:
                heapq.heappush(heap, (-activation[nb], str(nb[1]), nb))
    scores = {node[1]: v for node, v in received.items() if node[0] == "m" and v > 0}
    return scores, {
        "nodes_loaded": g.number_of_nodes(),
        "edges_loaded": g.number_of_edges(),
        "expanded": len(expanded),
    }


async def _hop(loader: _Loader, step: str, frontier: dict) -> dict[Any, list[tuple[Any, float]]]:
    """The out-edges of the frontier for one step of a meta-path: node -> [(neighbour, weight)]."""
    out: dict[Any, list[tuple[Any, float]]] = defaultdict(list)
    if step == "mention":
        for m, e, n in await loader.mentions(sorted(frontier, key=str)):
            if n <= loader.cfg.max_entity_degree and n > 1:
                out[m].append((("e", e), 1.0))
    elif step == "member":
        ents = sorted({e[1] for e in frontier})
        for e, m, n in await loader.members(ents):
            if n <= loader.cfg.max_entity_degree:
                out[("e", e)].append((m, 1.0 / math.sqrt(max(n, 1))))
    else:
        kinds = ("next",) if step == "next" else (step,)
        for a, b, kind, w in await loader.edges(sorted(frontier, key=str), kinds):
            out[a].append((b, _link_weight(kind, w, loader.cfg.causes_boost)))
    return out


async def mpfp(
    loader: _Loader, seeds: dict[UUID, float], query_entities, budget: int, cfg
) -> tuple[dict[UUID, float], dict[str, Any]]:
    """Forward push along each meta-path from the entry points (each with its activation, the
    question's entities with 1), summed over the paths and capped at 1: a memory's score is the
    activation that reached it, in the unit of the activation that entered the graph.

    The paths are independent, so they run concurrently, each hop one read for its frontier.
    ``query_entities`` may be an awaitable (the lookup still running): only the entity path's
    second step waits for it."""
    # The budget is shared by every step of every path, in equal parts; when it is smaller than
    # the number of steps, the first steps (in META_PATHS order) get one node each.
    per_step = max(1, budget // sum(len(p) for p in META_PATHS.values()))
    rooms: dict[str, list[int]] = {}
    left = budget
    for name, path in META_PATHS.items():
        rooms[name] = []
        for _ in path:
            rooms[name].append(min(per_step, left))
            left -= rooms[name][-1]
    results = await asyncio.gather(
        *(_push(loader, name, path, seeds, query_entities, rooms[name]) for name, path in META_PATHS.items())
    )
    masses = {name: reached for name, (reached, _) in zip(META_PATHS, results, strict=True) if reached}
    expanded = sum(n for _, n in results)
    total: dict[UUID, float] = defaultdict(float)
    for reached in masses.values():
        for n, v in reached.items():
            total[n] += v
    scores = {n: min(v, 1.0) for n, v in total.items()}
    return scores, {"paths": {k: len(v) for k, v in masses.items()}, "expanded": expanded}


async def _push(
    loader: _Loader, name: str, path: tuple[str, ...], seeds: dict[UUID, float], query_entities, rooms
) -> tuple[dict[UUID, float], int]:
    """One meta-path's forward push: the mass each memory holds at the end, and the nodes expanded."""
    # node -> where its mass came from (an entry point or a question entity) -> mass
    residual: dict[Any, dict[Any, float]] = {m: {m: a} for m, a in seeds.items()}
    settled: dict[Any, float] = defaultdict(float)
    expanded = 0
    for i, step in enumerate(path):
        if step == "member" and name == "entity":  # the question's entities join the entity step
            query_entities = await _resolved(query_entities)
            for e in query_entities:
                residual.setdefault(("e", e), {})[("e", e)] = 1.0
        totals = sorted(
            ((n, sum(o.values())) for n, o in residual.items()), key=lambda kv: (-kv[1], str(kv[0]))
        )
        frontier = {n: residual[n] for n, r in totals[: max(rooms[i], 0)] if r > PUSH_EPSILON}
        if not frontier:
            residual = {}
            continue  # (the entity path's second step may still start from the question's entities)
        expanded += len(frontier)
        out = await loader.hop(step, frontier)
        nxt: dict[Any, dict[Any, float]] = defaultdict(lambda: defaultdict(float))
        for node, origins in frontier.items():
            # A node pushed from keeps PUSH_ALPHA of its mass; an entry point keeps none of its
            # own (its fused score already counts it): the graph scores what reached a memory.
            keep = PUSH_ALPHA if i > 0 else 0.0
            settled[node] += keep * sum(origins.values())
            edges = out.get(node, [])
            norm = sum(w for _, w in edges)
            if norm <= 0:
                continue
            for origin, r in origins.items():
                for nb, w in edges:
                    if nb != origin:  # a path back to where it started says nothing about it
                        nxt[nb][origin] += (1 - keep) * r * w / norm
        residual = nxt
    for node, origins in residual.items():
        settled[node] += sum(origins.values())
    return {n: v for n, v in settled.items() if isinstance(n, UUID) and v > 0}, expanded


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _allowed(memory: Memory, req, now) -> bool:
    if memory.project != req.project:
        return False
    if req.category is not None and memory.category != req.category:
        return False
    if req.tags and not set(req.tags) <= set(memory.tags):
        return False
    return memory.expires_at is None or memory.expires_at > now


async def run(ctx, query, retrieved) -> list[tuple[Memory, float]]:
    cfg, method = ctx.config.graph, ctx.config.recall.graph
    detail: dict[str, Any] = {"method": method}
    retrieved.details["graph"] = detail
    if method == "off":
        detail["status"] = "off (recall.graph)"
        return []
    budget = cfg.expand(ctx.request.budget)
    loader = _Loader(ctx.store, ctx.request.project, cfg)
    seeds = _entry_points(ctx, retrieved)
    # The question's entities are looked up while the entry points' neighbourhood is read.
    looked_up = asyncio.ensure_future(loader.query_entities(_query_keys(query)))
    algorithm = mpfp if method == "mpfp" else spreading_activation
    try:
        if seeds or await looked_up:  # (without entry points, only the question's entities can start)
            scores, info = await algorithm(loader, seeds, looked_up, budget, cfg)
        query_entities = await looked_up
    finally:
        looked_up.cancel()
        loader.cancel()
    detail.update(
        {
            "budget": ctx.request.budget,
            "max_expanded": budget,
            "entry_points": len(seeds),
            "query_entities": sorted(set(query_entities.values())),
        }
    )
    if not seeds and not query_entities:
        detail["expanded"] = 0
        return []
    scores = {m: min(v, 1.0) for m, v in scores.items()}  # activation received can add up past 1
    detail.update(info)
    limit = max(ctx.config.recall.candidates_per_arm, cfg.entry_points)
    ranked = sorted(scores.items(), key=lambda kv: (-kv[1], str(kv[0])))[:limit]
    unknown = [m for m, _ in ranked if str(m) not in retrieved.memories]
    if unknown:
        loader.queries += 1
        await _score_on_store_arms(ctx, query, retrieved, unknown)
    detail["queries"] = loader.queries
    now = getattr(ctx, "clock", _utc_now)()
    out = []
    for m, s in ranked:
        memory = retrieved.memories.get(str(m))
        if memory is not None and _allowed(memory, ctx.request, now):
            out.append((memory, float(s)))
    detail["hits"] = len(out)
    detail["new_hits"] = sum(1 for m in unknown if str(m) in retrieved.memories)
    return sorted(out, key=lambda x: (-x[1], *stable_key(x[0])))


async def _score_on_store_arms(ctx, query, retrieved, ids: list[UUID]) -> None:
    """Exact scores of the graph's new hits on the store arms that ran (not added to their lists)."""
    store_arms = [a for a in retrieved.arms if a in ("vector", "keyword")]
    embedding = retrieved.embedding
    arms = tuple(a for a in store_arms if a != "vector" or embedding is not None) or ("keyword",)
    hits = await ctx.store.search(
        project=ctx.request.project,
        query=query.text,
        embedding=embedding if "vector" in arms else None,
        k=len(ids),
        arms=arms[:1],
        preselected={arms[0]: ids},
        common_df=ctx.config.recall.keyword_common_df,
        terms=retrieved.terms,  # (the question's, as the keyword arm read them)
    )
    from .retrieve import calibrated

    retrieved.add_scores(calibrated(ctx.embedder, hits, ["vector"]))  # on the store arms' scale
