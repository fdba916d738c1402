"""PostgreSQL + pgvector storage: one schema, one code path, embedded or external server."""

from memlane.pipeline.store.search import Hit
from memlane.pipeline.store.store import Store, StoredRow

__all__ = ["Hit", "Store", "StoredRow"]
