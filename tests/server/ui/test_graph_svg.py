"""The server-side SVG graph: bounded, deterministic, escaped, every node a link."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from memlane.server.ui import graph_svg
from memlane.server.ui.graph_svg import Node

SVG = "{http://www.w3.org/2000/svg}"


def star(n: int) -> tuple[list[Node], list[tuple[str, str, str]]]:
    nodes = [Node("e:0", "centre", "/entities/0", "entity", 0)]
    nodes += [Node(f"m:{i}", f"memory {i}", f"/memories/{i}", "memory", 1 + i % 2) for i in range(n)]
    edges = [(f"m:{i}", "e:0", "mentions" if i % 2 else "relates_to") for i in range(n)]
    return nodes, edges


def test_bounded_keeps_the_first_nodes_and_counts_the_rest():
    nodes, edges = star(100)
    g = graph_svg.bounded(nodes, edges)
    assert len(g.nodes) == graph_svg.MAX_NODES and g.hidden == 101 - graph_svg.MAX_NODES
    assert g.nodes[0].id == "e:0"
    kept = {n.id for n in g.nodes}
    assert all(a in kept and b in kept for a, b, _ in g.edges)


def test_bounded_drops_duplicate_nodes_and_edges():
    nodes, edges = star(3)
    g = graph_svg.bounded(nodes + nodes, edges + edges)
    assert len(g.nodes) == 4 and len(g.edges) == 3 and g.hidden == 0


def test_layout_is_deterministic_rings_by_hop():
    nodes, edges = star(10)
    g = graph_svg.bounded(nodes, edges)
    pos = graph_svg.layout(g)
    assert pos == graph_svg.layout(graph_svg.bounded(nodes, edges))
    c = graph_svg.SIZE / 2
    assert pos["e:0"] == (c, c)
    for n in g.nodes[1:]:
        x, y = pos[n.id]
        r = ((x - c) ** 2 + (y - c) ** 2) ** 0.5
        assert abs(r - graph_svg.RINGS[n.hop]) < 0.5
    assert len(set(pos.values())) == len(pos)  # no two nodes on one spot


def test_render_is_valid_svg_with_a_link_per_node_and_escaped_text():
    evil = '<script>alert("x")</script> "&\''
    nodes = [
        Node("e:1", evil, '/entities/1?a="b"&c', "entity", 0),
        Node("m:2", evil, "/memories/2", "memory", 1),
    ]
    g = graph_svg.bounded(nodes, [("m:2", "e:1", "mentions")])
    svg = graph_svg.render(g, title=evil)
    assert "<script>" not in svg
    root = ET.fromstring(svg)  # well-formed XML: every text was escaped
    links = root.findall(f"{SVG}a")
    assert [a.get("href") for a in links] == ['/entities/1?a="b"&c', "/memories/2"]
    assert root.find(f"{SVG}title").text == evil
    assert graph_svg.legend(g) == [("mentions", graph_svg.COLOURS["mentions"])]


def test_an_empty_graph_renders():
    ET.fromstring(graph_svg.render(graph_svg.Graph()))
