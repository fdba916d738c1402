"""PostgreSQL + pgvector storage: one schema, one code path, embedded or external server."""

from .store import Store, StoredRow

__all__ = ["Store", "StoredRow"]
