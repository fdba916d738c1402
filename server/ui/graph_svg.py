"""A memory-graph neighbourhood drawn server-side as SVG: no JavaScript, a deterministic layout.

The centre node sits in the middle; hop-1 nodes on a ring around it, hop-2 nodes on a wider ring,
each ring in the order given (strongest first), starting at the top and going clockwise. At most
``MAX_NODES`` are drawn; ``Graph.hidden`` says how many were left out. Every node is an ``<a>`` to
its page, every text is XML-escaped here (entity names and memory text are user data), and edges
are coloured by link type, with a legend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

MAX_NODES = 60
SIZE = 640
RINGS = {1: 170.0, 2: 290.0}
COLOURS = {
    "mentions": "#8a8f98",
    "relates_to": "#2f6fdb",
    "next": "#1e9e5a",
    "previous": "#7cc49a",
    "same_time": "#d08a00",
    "causes": "#c0392b",
    "co_occurs": "#8e44ad",
}


@dataclass(frozen=True, slots=True)
class Node:
    id: str  # unique in the graph, e.g. "m:<uuid>" or "e:<id>"
    label: str
    href: str
    kind: str  # "memory" or "entity"
    hop: int  # 0: the centre


@dataclass
class Graph:
    nodes: list[Node] = field(default_factory=list)
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (a, b, link type)
    hidden: int = 0


def bounded(nodes: list[Node], edges: list[tuple[str, str, str]], limit: int = MAX_NODES) -> Graph:
    """The first ``limit`` distinct nodes (the caller orders them centre first, strongest first)
    and the edges between them; ``hidden`` counts the nodes left out."""
    seen: dict[str, Node] = {}
    for n in nodes:
        seen.setdefault(n.id, n)
    kept = list(seen.values())[:limit]
    ids = {n.id for n in kept}
    unique_edges = list(dict.fromkeys((a, b, k) for a, b, k in edges if a in ids and b in ids and a != b))
    return Graph(kept, unique_edges, len(seen) - len(kept))


def layout(graph: Graph) -> dict[str, tuple[float, float]]:
    """(x, y) of each node: rings by hop, evenly spaced, in the given order."""
    c = SIZE / 2
    pos: dict[str, tuple[float, float]] = {}
    by_hop: dict[int, list[Node]] = {}
    for n in graph.nodes:
        by_hop.setdefault(min(n.hop, 2), []).append(n)
    for hop, ring in sorted(by_hop.items()):
        if hop == 0:
            for n in ring:
                pos[n.id] = (c, c)
            continue
        r = RINGS[hop]
        offset = 0.0 if hop == 1 else math.pi / max(len(ring), 1)
        for i, n in enumerate(ring):
            a = -math.pi / 2 + offset + 2 * math.pi * i / len(ring)
            pos[n.id] = (round(c + r * math.cos(a), 1), round(c + r * math.sin(a), 1))
    return pos


def _short(s: str, n: int = 24) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def render(graph: Graph, title: str = "Neighbourhood") -> str:
    """The graph as an inline ``<svg>`` element (a string safe to put in HTML as is)."""
    pos = layout(graph)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" viewBox="0 0 {SIZE} {SIZE}"'
        f' width="{SIZE}" height="{SIZE}" role="img" aria-label={quoteattr(title)}>',
        f"<title>{escape(title)}</title>",
    ]
    for a, b, kind in graph.edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        colour = COLOURS.get(kind, "#999")
        out.append(
            f'<line class="edge {escape(kind)}" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}"'
            f' stroke="{colour}" stroke-width="1.5"><title>{escape(kind)}</title></line>'
        )
    for n in graph.nodes:
        x, y = pos[n.id]
        shape = (
            f'<circle cx="{x}" cy="{y}" r="{14 if n.hop == 0 else 9}" class="node-{n.kind}"'
            f' fill="{"#f5c542" if n.kind == "entity" else "#9cc3ff"}" stroke="#333"/>'
        )
        if n.kind == "entity":
            shape = (
                f'<rect x="{x - 9}" y="{y - 9}" width="18" height="18" rx="3" class="node-entity"'
                f' fill="#f5c542" stroke="#333"/>'
            )
        out.append(
            f'<a href={quoteattr(n.href)} class="node" data-node={quoteattr(n.id)}>'
            f"<title>{escape(n.label)}</title>{shape}"
            f'<text x="{x}" y="{y + 24}" text-anchor="middle" font-size="11">{escape(_short(n.label))}</text></a>'
        )
    out.append("</svg>")
    return "".join(out)


def legend(graph: Graph) -> list[tuple[str, str]]:
    """(link type, colour) of the types drawn, for the legend under the picture."""
    kinds = list(dict.fromkeys(k for _, _, k in graph.edges))
    return [(k, COLOURS.get(k, "#999")) for k in kinds]
