"""A user's decisions: a memory marked superseded by another by hand (``memlane supersede``), or
made current again (``memlane unsupersede``), whatever the detector or the LLM decided. Only the
mark changes: both memories are kept as they were, and the decision can be taken back in turn.
``Engine.supersede`` and ``Engine.unsupersede`` resolve the ids within the caller's projects first.
"""

from __future__ import annotations

from uuid import UUID

from memlane.pipeline.records import Memory
from memlane.pipeline.store import Store


async def supersede(store: Store, old: UUID, new: UUID) -> Memory:
    """``old`` is superseded by ``new`` from the time ``new``'s value starts; refused when they are
    one memory, of two projects, or when ``new`` is already replaced, down its chain, by ``old``.
    Returns ``old`` as it now is."""
    return await store.set_successor(old, new)


async def unsupersede(store: Store, old: UUID) -> Memory:
    """``old`` current again: its ``superseded_by`` and ``valid_until`` cleared. Returns it."""
    return await store.set_successor(old, None)
