"""PostgreSQL + pgvector storage: one schema, one code path, embedded or external server."""

from .search import Hit
from .store import Store, StoredRow

__all__ = ["Hit", "Store", "StoredRow"]
