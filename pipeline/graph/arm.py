"""The graph arm (stage 4): memories connected to the best hits of the other arms, and to the
entities the question names, through the links of the write path (``store/graph.py``).

Entry points: the top ``graph.entry_points`` hits of the keyword arm, activation = their BM25 over
the best one. They are known before the question is embedded, so retrieval runs the arm then
(``expand``: the arm is declared ``from_entry_points``) and scores its new hits beside the
question's own statement; the question's entities are looked up even earlier (``prepare``). A
question without keyword hits runs the arm after the store arms, from their top fused hits
(activation = fused score over the best). Started from the keyword hits, the arm's three round
trips (hop 1, hop 2, the new hits' scores) overlap the embedding instead of following it.

Two algorithms (``recall.graph``), both bounded by the recall ``budget`` (``graph.expand_low`` /
``expand_mid`` / ``expand_high`` nodes expanded), both reported in the retrieval stage's
``detail.graph`` (entry points, nodes expanded, the bound, queries):

- ``activation``: spreading activation (``mpfp`` is the default: it measured better on LoCoMo). The
  entry points and the question's entities (activation 1) spread activation to their neighbours,
  ``graph.decay`` kept per hop, links weighted by kind (relates_to by its similarity,
  next/previous 0.9, same_time 0.5, causes x ``graph.causes_boost``); an entity passes activation
  on divided by the square root of its number of mentions, and one mentioned more than
  ``graph.max_entity_degree`` times is not expanded (the user's own name says nothing). The
  neighbourhood (links and mentions of the entry points, then the memories of their entities) is
  loaded in two rounds of queries and the spreading runs over a networkx graph, most active node first, until the budget of expansions is spent. A memory's score
  is the activation it received from other nodes, so an entry point connected to other good hits
  scores too.
- ``mpfp``: meta-path forward push. For each typed path (memory -> entity -> memory,
  memory -relates_to-> memory, memory -next/previous-> memory, twice), a forward push from the entry
  points along the path's link types, edges loaded per hop for the frontier only (the paths run in
  step: one statement per depth for every path's hop): each node pushed from keeps ``PUSH_ALPHA``
  of its mass and passes the rest to its neighbours in proportion to the link weights, never back
  to the entry point (or question entity) the mass came from. A memory's score is the mass it
  holds, summed over the paths.

The scale, the same for both algorithms (fusion uses it as it is, ``normalise = "none"``): an
entry point enters with its activation (in [0, 1]), a question entity with 1, and a memory's score
is the activation that reached it, capped at 1. So a neighbour of a weak entry point gets less
than a neighbour of a strong one, a memory several paths agree on gets more than one reached
once, and the graph adds its full weight (``recall.arm_weights.graph``) only for full-strength evidence, not
for whatever is this query's best graph hit. An entry point scores only what other entry points
push to it.

The arm scores only its own hits. Retrieval scores the hits the store arms did not return on them
exactly (``recall/candidates.py``), so fusion and the relevance floor treat them like any candidate.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections import defaultdict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import UUID

from memlane.pipeline import entities
from memlane.pipeline.config import EngineConfig, GraphConfig
from memlane.pipeline.records import Query
from memlane.pipeline.store.graph_reads import GraphRead, GraphReadQueries

KIND_WEIGHT = {"relates_to": None, "next": 0.9, "previous": 0.9, "same_time": 0.5, "causes": 1.0}
META_PATHS: dict[str, tuple[str, ...]] = {
    "entity": ("mention", "member"),
    "relates_to": ("relates_to",),
    "next": ("next",),
    "next2": ("next", "next"),
}
PUSH_ALPHA = 0.15  # forward push: share of residual a node keeps before pushing the rest on
PUSH_EPSILON = 1e-4

# The question's entity nodes: entity id -> name (``prepare``).
EntityNodes = dict[int, str]


class GraphRequest(Protocol):
    """What the arm reads of the recall's request (``recall/query.py``'s ``RecallQuery``)."""

    @property
    def project(self) -> str: ...

    @property
    def budget(self) -> str: ...

    @property
    def limit(self) -> int: ...

    @property
    def explain(self) -> bool: ...


class GraphContext(Protocol):
    """What the arm reads of the recall's context: recall passes its ``RecallContext``
    (``recall/context.py``), which this layer, below recall, may not import."""

    @property
    def config(self) -> EngineConfig: ...

    @property
    def store(self) -> GraphReadQueries: ...

    @property
    def request(self) -> GraphRequest: ...


def _query_keys(query: Query) -> list[str]:
    names = list(query.intent.entities) if query.intent is not None else []
    if not names:
        names = [e.name for e in entities.extract(query.text)]
    keys = [entities.normalise(n) for n in names]
    return sorted({k for k in keys if k})


def _order(node) -> tuple:
    """A node's place among ties: the order of ``str(node)`` (an entity node's tuple before any
    memory id, ids by their text), without formatting thousands of ids per recall (a UUID's text
    orders as its integer does). Forward push keys memory nodes by that integer."""
    if isinstance(node, int):
        return (1, node)
    return (1, node.int) if isinstance(node, UUID) else (0, str(node))


def _link_weight(kind: str, weight: float, causes_boost: float) -> float:
    base = KIND_WEIGHT.get(kind)
    w = weight if base is None else base
    return w * causes_boost if kind == "causes" else w


class _Loader:
    """Neighbourhood reads of one recall, a whole round at a time: every read of one hop (of every
    meta-path, or the entry points' links and mentions) goes to the store as one statement. A hop
    asked again for the same frontier (the ``next`` and ``next2`` paths both start from the entry
    points) is read once."""

    def __init__(self, store: GraphReadQueries, project: str, cfg: GraphConfig) -> None:
        self.store, self.project, self.cfg = store, project, cfg
        self.queries = 0
        self.hubs: set[int] = set()  # entities seen past graph.max_entity_degree: never expanded
        self._hops: dict[tuple, dict[Any, list[tuple[Any, float]]]] = {}
        # Forward push keys a memory node by its id's integer (a UUID hashes in Python, and a push
        # hashes its nodes thousands of times per recall): the ids of the integers seen.
        self.ids: dict[int, UUID] = {}
        # Counting an entity's mentions past this says nothing more: it is not expanded.
        self._count_up_to = cfg.max_entity_degree + 1

    async def read(self, reads: list[GraphRead]) -> list[list[tuple]]:
        """Raw rows of each read (``Store.graph_reads``), in one round trip."""
        if not any(r.ids for r in reads):
            return [[] for _ in reads]
        self.queries += 1
        found = await self.store.graph_reads(
            reads, project=self.project, per_node=self.cfg.per_node, count_up_to=self._count_up_to
        )
        cap = self.cfg.max_entity_degree
        for r, rows in zip(reads, found, strict=True):
            if r.what == "mentions":
                self.hubs.update(e for _, e, n in rows if n > cap)
            elif r.what == "members":
                self.hubs.update(e for e, _, n in rows if n > cap)
        return found

    async def query_entities(self, keys: list[str]) -> EntityNodes:
        if not keys:
            return {}
        self.queries += 1
        return await self.store.entity_ids(self.project, keys)

    async def hops(self, asks: list[tuple[str, dict]]) -> list[dict[Any, list[tuple[Any, float]]]]:
        """The out-edges of each (meta-path step, frontier): node -> [(neighbour, weight)], memory
        nodes by their integer (``ids``)."""
        keys = [(step, frozenset(frontier)) for step, frontier in asks]
        todo = list(dict.fromkeys(k for k in keys if k not in self._hops))
        rows = await self.read([_hop_read(step, frontier, self.ids) for step, frontier in todo])
        for key, found in zip(todo, rows, strict=True):
            self._hops[key] = _hop_out(key[0], found, self.cfg, self.ids)
        return [self._hops[k] for k in keys]


def _hop_read(step: str, frontier, ids: dict[int, UUID]) -> GraphRead:
    """The read of one step from a frontier of memory nodes (their integers) or entity nodes."""
    if step == "member":
        return GraphRead("members", tuple(sorted({e[1] for e in frontier})))
    memories = tuple(ids[n] for n in sorted(frontier))
    if step == "mention":
        return GraphRead("mentions", memories)
    return GraphRead("edges", memories, ("next",) if step == "next" else (step,))


def _hop_out(step: str, rows: list[tuple], cfg, ids: dict[int, UUID]) -> dict[Any, list[tuple[Any, float]]]:
    """A hop's rows as out-edges for forward push: node -> [(neighbour, weight)], a memory by its
    id's integer (each new one noted in ``ids``). An entity mentioned once leads nowhere; one past
    ``max_entity_degree`` (a hub) is not expanded."""
    out: dict[Any, list[tuple[Any, float]]] = defaultdict(list)
    if step == "mention":
        for m, e, n in rows:
            if n <= cfg.max_entity_degree and n > 1:
                out[m.int].append((("e", e), 1.0))
    elif step == "member":
        for e, m, n in rows:
            if n <= cfg.max_entity_degree:
                key = m.int
                ids[key] = m
                out[("e", e)].append((key, 1.0 / math.sqrt(max(n, 1))))
    else:
        for a, b, kind, w in rows:
            key = b.int
            ids[key] = b
            out[a.int].append((key, _link_weight(kind, w, cfg.causes_boost)))
    return out


async def _resolved(value: EntityNodes | Awaitable[EntityNodes]) -> EntityNodes:
    """A value that may still be an awaitable (the question's entities, looked up concurrently)."""
    return value if isinstance(value, dict) else await value


async def spreading_activation(
    loader: _Loader,
    seeds: dict[UUID, float],
    query_entities: EntityNodes | Awaitable[EntityNodes],
    budget: int,
    cfg: GraphConfig,
    track: bool = False,
) -> tuple[dict[UUID, float], dict[str, Any]]:
    """Activation received by each memory node, and what the run did. ``query_entities`` may be
    an awaitable: it is looked up while the entry points' neighbourhood is read. ``track`` (an
    explained recall): ``info["reached"]`` says, per memory, the entry point its strongest chain of
    gains started from and the nodes on that chain."""
    import networkx as nx  # here: 0.2 s to import, on a server's start-up path otherwise

    g = nx.Graph()
    seed_ids = sorted(seeds, key=_order)
    (edges, mentions), entity_nodes = await asyncio.gather(
        loader.read(
            [
                GraphRead("edges", tuple(seed_ids), ("relates_to", "next", "same_time", "causes")),
                GraphRead("mentions", tuple(seed_ids)),
            ]
        ),
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
    for e in entity_nodes:
        g.add_node(("e", e))
    expandable = sorted(
        {e for e, n in degree.items() if n <= cfg.max_entity_degree and n > 1} | set(entity_nodes)
    )
    [members] = await loader.read([GraphRead("members", tuple(expandable))])
    for e, m, n in members:
        degree[e] = n
        if n <= cfg.max_entity_degree:  # a hub (a speaker's own name) says nothing, asked about or not
            g.add_edge(("e", e), ("m", m), weight=1.0, kind="mention")

    activation: dict[tuple, float] = defaultdict(float)
    received: dict[tuple, float] = defaultdict(float)
    for mid, a in seeds.items():
        activation[("m", mid)] = a
    for e in entity_nodes:
        activation[("e", e)] = 1.0
    heap = [(-a, str(node[1]), node) for node, a in activation.items()]
    heapq.heapify(heap)
    expanded: set[tuple] = set()
    via: dict[tuple, tuple[float, tuple]] = {}  # node -> (best gain, the node it came from), if track
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
            if track and gain > via.get(nb, (0.0,))[0]:
                via[nb] = (gain, node)
            if nb not in expanded:
                heapq.heappush(heap, (-activation[nb], str(nb[1]), nb))
    scores = {node[1]: v for node, v in received.items() if node[0] == "m" and v > 0}
    info: dict[str, Any] = {
        "nodes_loaded": g.number_of_nodes(),
        "edges_loaded": g.number_of_edges(),
        "expanded": len(expanded),
    }
    if track:
        reached = {}
        for mid, v in scores.items():
            chain: list[tuple] = []
            node = ("m", mid)
            while node in via and len(chain) < 8 and node not in chain:
                chain.append(node)
                node = via[node][1]
            reached[mid] = [(("m", node[1]) if node[0] == "m" else node, "activation", v, chain[:0:-1])]
        info["reached"] = reached
    return scores, info


async def mpfp(
    loader: _Loader,
    seeds: dict[UUID, float],
    query_entities: EntityNodes | Awaitable[EntityNodes],
    budget: int,
    cfg: GraphConfig,
    track: bool = False,
) -> tuple[dict[UUID, float], dict[str, Any]]:
    """Forward push along each meta-path from the entry points (each with its activation, the
    question's entities with 1), summed over the paths and capped at 1: a memory's score is the
    activation that reached it, in the unit of the activation that entered the graph.

    The paths are independent and run in step: the hop of every path at one depth is one read
    (one round trip), so two-step paths cost two round trips in all. ``query_entities`` may be an
    awaitable (the lookup still running): only the entity path's second step waits for it.
    ``track`` (an explained recall): ``info["reached"]`` says, per memory, which entry points (or
    question entities) its mass came from, along which meta-path; the push already keeps where
    each node's mass came from, so this only keeps it past settling."""
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
    ids = loader.ids
    keyed: dict[int, float] = {}
    for m, a in seeds.items():
        ids[m.int] = m
        keyed[m.int] = a
    pushes = {name: _Push(keyed, track) for name in META_PATHS}
    for depth in range(max(len(p) for p in META_PATHS.values())):
        asks: dict[str, tuple[str, dict]] = {}
        for name, path in META_PATHS.items():
            if depth >= len(path):
                continue
            push = pushes[name]
            if path[depth] == "member" and name == "entity":  # the question's entities join here
                for e in await _resolved(query_entities):
                    push.residual.setdefault(("e", e), {})[("e", e)] = 1.0
            frontier = push.frontier(rooms[name][depth])
            if frontier:
                asks[name] = (path[depth], frontier)
            else:
                push.residual = {}  # (the entity path's second step may still start from the question's entities)
        outs = await loader.hops(list(asks.values()))
        for (name, (_, frontier)), out in zip(asks.items(), outs, strict=True):
            # A node pushed from keeps PUSH_ALPHA of its mass; an entry point keeps none of its own
            # (its fused score already counts it): the graph scores what reached a memory.
            pushes[name].push(frontier, out, keep=PUSH_ALPHA if depth > 0 else 0.0)
    masses = {name: reached for name, push in pushes.items() if (reached := push.settle())}
    total: dict[int, float] = defaultdict(float)
    for reached in masses.values():
        for n, v in reached.items():
            total[n] += v
    scores = {ids[n]: min(v, 1.0) for n, v in total.items()}
    expanded = sum(p.expanded for p in pushes.values())
    info: dict[str, Any] = {"paths": {k: len(v) for k, v in masses.items()}, "expanded": expanded}
    if track:
        reached_from: dict[UUID, list] = defaultdict(list)
        for name, push in pushes.items():
            for n, origins in push.origins.items():
                if isinstance(n, int):
                    reached_from[ids[n]].extend(
                        (_origin(o, ids), name, mass, []) for o, mass in origins.items() if mass > 0
                    )
        info["reached"] = dict(reached_from)
    return scores, info


def _origin(node, ids: dict[int, UUID]) -> tuple:
    """An entry point as a node: ("m", memory id) or ("e", entity id)."""
    return node if isinstance(node, tuple) else ("m", ids[node])


class _Push:
    """One meta-path's forward push: where the mass is, and where it came from."""

    def __init__(self, seeds: dict[int, float], track: bool = False) -> None:
        # node -> where its mass came from (an entry point or a question entity) -> mass
        self.residual: dict[Any, dict[Any, float]] = {m: {m: a} for m, a in seeds.items()}
        self.settled: dict[Any, float] = defaultdict(float)
        self.expanded = 0
        self.track = track  # keep the settled mass per origin too (``origins``): explained recalls
        self.origins: dict[Any, dict[Any, float]] = defaultdict(lambda: defaultdict(float))

    def _settle(self, node, origins: dict[Any, float], share: float) -> None:
        self.settled[node] += share * sum(origins.values())
        if self.track:
            for origin, r in origins.items():
                self.origins[node][origin] += share * r

    def frontier(self, room: int) -> dict[Any, dict[Any, float]]:
        """The (at most ``room``) nodes holding the most mass, above ``PUSH_EPSILON``."""
        totals = sorted(
            ((n, sum(o.values())) for n, o in self.residual.items()), key=lambda kv: (-kv[1], _order(kv[0]))
        )
        return {n: self.residual[n] for n, r in totals[: max(room, 0)] if r > PUSH_EPSILON}

    def push(self, frontier: dict, out: dict[Any, list[tuple[Any, float]]], keep: float) -> None:
        self.expanded += len(frontier)
        nxt: dict[Any, dict[Any, float]] = defaultdict(lambda: defaultdict(float))
        for node, origins in frontier.items():
            self._settle(node, origins, keep)
            edges = out.get(node, [])
            norm = sum(w for _, w in edges)
            if norm <= 0:
                continue
            for origin, r in origins.items():
                for nb, w in edges:
                    if nb != origin:  # a path back to where it started says nothing about it
                        nxt[nb][origin] += (1 - keep) * r * w / norm
        self.residual = nxt

    def settle(self) -> dict[int, float]:
        """The mass each memory node (its id's integer) holds at the end."""
        for node, origins in self.residual.items():
            self._settle(node, origins, 1.0)
        return {n: v for n, v in self.settled.items() if isinstance(n, int) and v > 0}


async def prepare(ctx: GraphContext, query: Query) -> EntityNodes:
    """The question's entity nodes: they need only the question, so retrieval starts this read
    while the question is embedded (``Arm.prepare``)."""
    keys = _query_keys(query) if ctx.config.recall.graph != "off" else []
    return await ctx.store.entity_ids(ctx.request.project, keys) if keys else {}


@dataclass(slots=True)
class Expansion:
    """What the graph reached from its entry points: memory ids with their scores, best first (at
    most ``max(graph.max_hits, the recall's limit, graph.entry_points)``), and what the
    run did (the trace's ``detail.graph``)."""

    ranked: list[tuple[UUID, float]]
    detail: dict[str, Any]


async def expand(
    ctx: GraphContext,
    query: Query,
    seeds: dict[UUID, float],
    looked_up: asyncio.Future[EntityNodes] | None,
    source: str,
) -> Expansion:
    """Run the configured algorithm from ``seeds`` (memory id -> activation in [0, 1]; the best
    ``graph.entry_points`` are taken, ties in the order given) and the question's entities
    (``looked_up``: the awaitable of ``prepare``, or None to look them up now). ``source`` names
    where the entry points came from."""
    cfg, method = ctx.config.graph, ctx.config.recall.graph
    detail: dict[str, Any] = {"method": method}
    if method == "off":
        detail["status"] = "off (recall.graph)"
        return Expansion([], detail)
    # Ties keep the order given (the keyword arm's, by content; fusion's): never the random ids.
    seeds = dict(sorted(seeds.items(), key=lambda kv: -kv[1])[: cfg.entry_points])
    budget = cfg.expand(ctx.request.budget)
    loader = _Loader(ctx.store, ctx.request.project, cfg)
    if looked_up is None:
        looked_up = asyncio.ensure_future(loader.query_entities(_query_keys(query)))
    elif _query_keys(query):
        loader.queries += 1
    algorithm = mpfp if method == "mpfp" else spreading_activation
    scores: dict[UUID, float] = {}
    try:
        if seeds or await looked_up:  # (without entry points, only the question's entities can start)
            scores, info = await algorithm(loader, seeds, looked_up, budget, cfg, ctx.request.explain)
            detail.update(info)
        query_entities = await looked_up
    finally:
        looked_up.cancel()
    detail.update(
        {
            "budget": ctx.request.budget,
            "max_expanded": budget,
            "entry_points": len(seeds),
            "entry_points_from": source,
            "query_entities": sorted(set(query_entities.values())),
            "queries": loader.queries,
            # What bounds the arm's reads whatever the project's size: links read per node, and
            # mentions counted no further than the degree past which an entity is not expanded.
            "bound": {
                "per_node": cfg.per_node,
                "max_entity_degree": cfg.max_entity_degree,
                "hubs_not_expanded": len(loader.hubs),
            },
        }
    )
    detail.setdefault("expanded", 0)
    limit = max(cfg.max_hits, ctx.request.limit, cfg.entry_points)
    # Activation received can add up past 1.
    ranked = sorted(((m, min(v, 1.0)) for m, v in scores.items()), key=lambda kv: (-kv[1], _order(kv[0])))
    if "reached" in detail:
        detail["reached"] = _reached(detail["reached"], ranked[:limit], query_entities)
    return Expansion(ranked[:limit], detail)


def _reached(reached: dict[UUID, list], ranked, entity_names: dict[int, str], most: int = 3) -> dict:
    """The trace's ``detail.graph.reached``: for each hit of the arm, its strongest (at most
    ``most``) entry points: ``{"from": "memory <id>" | "entity <name or id>", "path": meta-path or
    "activation", "mass", "via": [nodes between]}``."""

    def label(node) -> str:
        kind, key = node
        return f"memory {key}" if kind == "m" else f"entity {entity_names.get(key, key)}"

    out = {}
    for mid, _ in ranked:
        ways = sorted(reached.get(mid, []), key=lambda w: (-w[2], str(w[0]), w[1]))[:most]
        out[str(mid)] = [
            {"from": label(o), "path": path, "mass": round(mass, 4), "via": [label(n) for n in via]}
            for o, path, mass, via in ways
        ]
    return out
