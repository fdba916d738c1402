"""``server-memory``: the reference MCP memory server's ``memory.jsonl`` (@modelcontextprotocol/
server-memory). Each line is ``{"type": "entity", "name", "entityType", "observations": [...]}`` or
``{"type": "relation", "from", "to", "relationType"}``; older versions wrote ``memory.json`` with the
same lines.

Each observation is a memory that starts with its entity's name ("Alice Chen: leads payments"),
so the entity extractor makes the name an entity of the memory graph; the entity type is a tag.
Each relation is a memory of its own ("Alice Chen works_at Acme Corp"), even when an end is not an
entity of the file (the server keeps such relations too): a fact stated only by a relation is kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from memlane.pipeline.importers.records import Fact, Record, Skip, WrongFormat, jsonl_objects, shape

EXPECTS = 'JSONL lines {"type": "entity", "name", "entityType", "observations"} or {"type": "relation", ...}'


def _is_line(obj: object) -> bool:
    return isinstance(obj, dict) and (
        (obj.get("type") == "entity" and "name" in obj and "observations" in obj)
        or (obj.get("type") == "relation" and {"from", "to", "relationType"} <= obj.keys())
    )


def detect(path: Path) -> str | None:
    if not path.is_file() or path.suffix not in (".jsonl", ".json"):
        return None
    for _, obj in jsonl_objects(path):
        return "a knowledge graph of entity and relation lines" if _is_line(obj) else None
    return None


def _tag(entity_type: object) -> tuple[str, ...]:
    if not isinstance(entity_type, str) or not entity_type.strip():
        return ()
    return (entity_type.strip().lower()[:64],)


def read(path: Path) -> Iterator[Record]:
    first = True
    for n, obj in jsonl_objects(path):
        if first and not _is_line(obj):
            found = f"line {n}: " + (shape(obj) if obj is not None else "not JSON")
            raise WrongFormat(path, "server-memory", EXPECTS, found)
        first = False
        if not _is_line(obj):
            yield Skip("not an entity or relation line")
            continue
        assert isinstance(obj, dict)
        if obj["type"] == "relation":
            a, b, rel = str(obj["from"]).strip(), str(obj["to"]).strip(), str(obj["relationType"]).strip()
            if not (a and b and rel):
                yield Skip("relation with an empty end")
                continue
            yield Fact(
                content=f"{a} {rel.replace('_', ' ')} {b}",
                id=f"relation:{a}|{rel}|{b}",
                tags=("relation",),
                metadata={"relation": {"from": a, "to": b, "type": rel}},
            )
            continue
        name = str(obj["name"]).strip()
        observations = obj.get("observations") or []
        if not isinstance(observations, list) or not observations:
            yield Skip("entity without observations")
            continue
        for i, text in enumerate(observations):
            if not isinstance(text, str) or not text.strip():
                yield Skip("empty observation")
                continue
            text = text.strip()
            content = text if text.lower().startswith(name.lower()) else f"{name}: {text}"
            yield Fact(
                content=content,
                id=f"entity:{name}#{i}",
                tags=_tag(obj.get("entityType")),
                metadata={"entity": name, "entity_type": obj.get("entityType")},
            )
