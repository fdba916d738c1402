"""``memlane bench labels``: are automatic category names what a person would write?

The data, ``bench/data/category_labels.json``, was written by hand for this benchmark (nothing
in it comes from LoCoMo, BEAM or another set): clusters of memories in the style an assistant
stores them, across projects (an editor's settings, a project's sync job, a marathon, a kitchen
renovation, ...), each with the one to three labels a person would accept. ``--data FILE`` takes
another file of the same layout.

A label matches a cluster when, lower-cased, it is one of the cluster's labels or ends in the same
noun (singular: "deploys" matches "deploy", "kitchen renovation" matches "renovation"). Figures,
each for the method before (``pairs``: the two most distinctive key terms of the memory, in the
text's order, as topics were named until then) and the method now (``phrases``: ``labels.py``'s
noun phrases):

- ``founder``: clusters whose first memory's name matches: what a new automatic topic is called
  when that memory founds it (``topics.py`` names a topic after the memory that founds it);
- ``any_memory``: memories whose own name would match their cluster, had they founded the topic;
- ``assigned``: memories whose category, through ``Topics.assign`` with taxonomy ``auto`` (the
  embedding model's clustering, the memories stored in order, one topic list per project), matches
  their cluster: what the browser shows; a memory given no topic counts as a miss;
- ``cluster`` (phrases only): clusters whose label from all their memories
  (``labels.label(texts)``) matches.

Nothing is stored: no database is opened.
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from memlane.bench.common import versions
from memlane.pipeline.config import TopicsConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.remember.labels import head_noun, label
from memlane.pipeline.remember.topics import Topics, key_terms, topic_name

DATA_NAME = "data/category_labels.json"


def pairs_name(content: str) -> str | None:
    """The name topics were given before noun phrases: the memory's two most distinctive key
    terms in the text's order, or None when it has fewer than two."""
    terms = key_terms(content)
    if len(terms) < 2:
        return None
    lower = content.lower()
    return " ".join(sorted(terms[:2], key=lower.find))


METHODS = {"pairs": pairs_name, "phrases": topic_name}


def matches(name: str | None, accepted: list[str]) -> bool:
    """Whether a label is one of the accepted ones or ends in the same noun."""
    if not name:
        return False
    name = " ".join(name.lower().split())
    return any(name == a.lower() or head_noun(name) == head_noun(a) for a in accepted)


def load(path: Path | None = None) -> list[dict[str, Any]]:
    """The clusters of a labelled file (the bundled one by default), checked."""
    where = str(path) if path is not None else DATA_NAME
    try:
        text = (
            path.read_text(encoding="utf-8")
            if path is not None
            else files("memlane.bench").joinpath(DATA_NAME).read_text(encoding="utf-8")
        )
        data = json.loads(text)
    except (OSError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None
    clusters = data.get("clusters") if isinstance(data, dict) else None
    if not isinstance(clusters, list) or not clusters:
        raise ConfigError(f'{where}: expected {{"clusters": [...]}} with at least one cluster')
    for n, c in enumerate(clusters, 1):
        ok = (
            isinstance(c, dict)
            and isinstance(c.get("id"), str)
            and isinstance(c.get("project"), str)
            and isinstance(c.get("labels"), list)
            and c["labels"]
            and all(isinstance(x, str) and x.strip() for x in c["labels"])
            and isinstance(c.get("memories"), list)
            and c["memories"]
            and all(isinstance(x, str) and x.strip() for x in c["memories"])
        )
        if not ok:
            raise ConfigError(
                f'{where}: cluster {n} must be {{"id", "project", "labels": [str, ...], "memories": [str, ...]}}'
            )
    return clusters


def _share(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


def _assigned(clusters: list[dict[str, Any]], vectors: dict[str, Any], embedder, namer) -> list[str | None]:
    """Each memory's category through the write path's topic assignment, in the file's order."""
    cfg = TopicsConfig(taxonomy="auto")
    topics = Topics(cfg, embedder, namer=namer)
    autos: dict[str, list] = {}
    out: list[str | None] = []
    for c in clusters:
        auto = autos.setdefault(c["project"], [])
        for m in c["memories"]:
            got = topics.assign(m, vectors[m], [], auto).topics
            out.append(got[0] if got else None)
    return out


async def run(settings, data: Path | None = None, *, embedder=None) -> dict[str, Any]:
    """The report. ``embedder``: a loaded one to reuse (tests)."""
    from memlane.pipeline.providers.embedding import make_embedder

    clusters = load(data)
    if embedder is None:
        embedder = make_embedder(settings.engine().embedding)
        embedder.load()
    texts = [m for c in clusters for m in c["memories"]]
    vectors = dict(zip(texts, embedder.embed_batch(texts), strict=True))
    accepted = [c["labels"] for c in clusters for _ in c["memories"]]
    memories = len(texts)
    report: dict[str, Any] = {
        "benchmark": "labels",
        "data": data.name if data is not None else f"bench/{DATA_NAME}",
        "clusters": len(clusters),
        "memories": memories,
        "embedding": embedder.model_id,
        "versions": await versions(),
        "methods": {},
        "per_cluster": [],
    }
    for method, namer in METHODS.items():
        founders = [namer(c["memories"][0]) for c in clusters]
        own = [namer(m) for m in texts]
        assigned = _assigned(clusters, vectors, embedder, namer)
        figures = {
            "founder": _share(
                sum(matches(n, c["labels"]) for n, c in zip(founders, clusters, strict=True)), len(clusters)
            ),
            "any_memory": _share(sum(matches(n, a) for n, a in zip(own, accepted, strict=True)), memories),
            "assigned": _share(sum(matches(n, a) for n, a in zip(assigned, accepted, strict=True)), memories),
            "no_topic": sum(n is None for n in assigned),
        }
        if method == "phrases":
            figures["cluster"] = _share(
                sum(matches(label(c["memories"]), c["labels"]) for c in clusters), len(clusters)
            )
        report["methods"][method] = figures
    for c in clusters:
        report["per_cluster"].append(
            {
                "id": c["id"],
                "labels": c["labels"],
                **{f"{m}_founder": namer(c["memories"][0]) for m, namer in METHODS.items()},
                "phrases_cluster": label(c["memories"]),
            }
        )
    return report


def markdown(report: dict[str, Any]) -> str:
    methods = report["methods"]
    lines = [
        f"### Category labels: {report['clusters']} clusters, {report['memories']} memories ({report['data']})",
        "",
        "| method | founder's name | any memory's name | category assigned | no topic | whole cluster |",
        "|---|---|---|---|---|---|",
    ]
    names = {"pairs": "key-term pairs (before)", "phrases": "noun phrases (now)"}
    for m, f in methods.items():
        cluster = f"{f['cluster']:.2f}" if "cluster" in f else "-"
        lines.append(
            f"| {names.get(m, m)} | {f['founder']:.2f} | {f['any_memory']:.2f} | {f['assigned']:.2f} |"
            f" {f['no_topic']} | {cluster} |"
        )
    lines += [
        "",
        "| cluster | accepted | before | now | whole cluster |",
        "|---|---|---|---|---|",
    ]
    for c in report["per_cluster"]:
        lines.append(
            f"| {c['id']} | {', '.join(c['labels'])} | {c['pairs_founder'] or '-'} |"
            f" {c['phrases_founder'] or '-'} | {c['phrases_cluster'] or '-'} |"
        )
    lines += ["", f"Embedding (for the assigned categories): {report['embedding']}."]
    return "\n".join(lines) + "\n"
