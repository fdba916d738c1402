"""LLM entity and relation extraction on the write path (optional).

When an LLM serves the ``extract`` stage (``[llm.stages.extract] enabled = true``, off by default:
it is one LLM call per new memory), each newly created memory is shown, with the earlier memories
it ``relates_to``, to the ``extract`` prompt; the entities it names (beyond what the offline
extractor found) and the ``causes`` links it reports are added in a second short transaction. The
memory and its offline entities and links are already stored by then (one transaction,
``write.store_inputs``): a failed or slow LLM call costs the extra entities and links only, and
the call is logged, never raised. ``memlane maintain --task links`` rebuilds the offline part only.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memlane.pipeline.entities import KINDS, Entity, normalise
from memlane.pipeline.llm.service import LLMBudget, parse_json
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.store.graph import LinkItem

if TYPE_CHECKING:
    from memlane.pipeline.remember.context import WriteContext

log = logging.getLogger(__name__)

MAX_LLM_ENTITIES = 20


def parse_reply(
    data: Any, earlier: list[UUID], memory_id: UUID
) -> tuple[list[Entity], list[tuple[UUID, UUID]]]:
    """The entities and (cause, effect) pairs of one reply; anything malformed is an LLMError."""
    if not isinstance(data, dict):
        raise LLMError(f"extract is not a JSON object: {type(data).__name__}")
    entities: list[Entity] = []
    for item in data.get("entities") or []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        name = item["name"].strip()[:200]
        given = item.get("kind")
        kind = given if isinstance(given, str) and given in KINDS else "name"
        key = normalise(name)
        if key:
            entities.append(Entity(key, name, kind))
    pairs: list[tuple[UUID, UUID]] = []
    for field_name, forward in (("caused_by", False), ("causes", True)):
        for n in data.get(field_name) or []:
            if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(earlier):
                continue
            other = earlier[n - 1]
            pairs.append((memory_id, other) if forward else (other, memory_id))
    return entities[:MAX_LLM_ENTITIES], pairs


async def enrich(ctx: WriteContext, created: list[tuple[UUID, str, str]]) -> dict[str, Any]:
    """Ask the ``extract`` stage about each (id, project, content); add what it reports."""
    if ctx.llm is None or not created:
        return {"status": "skipped: no LLM provider"}
    llm, why = ctx.llm.stage("extract")
    if llm is None:
        return {"status": f"skipped: {why}"}
    store = ctx.store
    budget = LLMBudget(timeout_s=ctx.config.llm.timeout_s * 2)

    async def one(mid: UUID, project: str, content: str) -> tuple[LinkItem, list[tuple[UUID, UUID]]]:
        edges = await store.memory_edges([mid], ("relates_to",))
        earlier = [b for a, b, _, _ in edges if a == mid][:5]
        texts = await store.contents(earlier)
        numbered = "\n".join(f"[{i}] {texts[e]}" for i, e in enumerate(earlier, 1) if e in texts)
        answer = await llm.ask(budget, memory=content, earlier=numbered or "(none)")
        entities, pairs = parse_reply(parse_json(answer.text), earlier, mid)
        return LinkItem(mid, project, entities), pairs

    results = await asyncio.gather(*(one(*c) for c in created), return_exceptions=True)
    items: list[LinkItem] = []
    causes: list[tuple[UUID, UUID]] = []
    failed = 0
    for r in results:
        if isinstance(r, BaseException):
            failed += 1
            log.warning(
                "LLM extraction failed for a new memory: %s", getattr(r, "reason", None) or type(r).__name__
            )
            continue
        items.append(r[0])
        causes.extend(r[1])
    counts = await store.add_extracted(items, causes) if items else {}
    return {"status": "ran" if not failed else f"degraded: {failed} of {len(created)} failed", **counts}
