"""What memlane keeps of a memory's past: the contents its updates replaced, the memories it
superseded (down their chain), and the memory that supersedes it now (the end of its chain)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from memlane.pipeline.records import Memory
from memlane.pipeline.store import Store

# (id, content, valid from, valid until) of a memory a newer one superseded.
Earlier = tuple[UUID, str, datetime, datetime | None]


async def history(store: Store, memory_id: UUID) -> dict[str, Any]:
    """``memory``; ``versions``, the contents its updates replaced, oldest first; ``supersedes``,
    the memories it superseded, newest first (``Earlier``); ``superseded_by``, the current memory
    at the end of its chain, or None."""
    m: Memory = await store.get(memory_id)
    earlier: list[Earlier] = (await store.history_of([memory_id])).get(memory_id, [])
    later = (await store.successors([memory_id])).get(memory_id)
    return {
        "memory": m,
        "versions": await store.versions(memory_id),
        "supersedes": earlier,
        "superseded_by": later,
    }
