"""PostgreSQL + pgvector storage: one schema, one code path, embedded or external server.

``Store`` is composed of one part per role, each in its own module: the connections and their
recovery (connection.py), the embedding model (model.py), the writes (writes.py), and the reads:
whole memories (reads.py), recall's arms (search.py), handles, browsing, topics, scoring, the
graph, the vector indexes and ``memlane maintain``'s queries (upkeep.py)."""

from memlane.pipeline.store.browse import BrowseQueries
from memlane.pipeline.store.connection import Connection, _read_again_once
from memlane.pipeline.store.graph import GraphQueries
from memlane.pipeline.store.handles import HandleQueries
from memlane.pipeline.store.model import ModelSettings
from memlane.pipeline.store.reads import Reads
from memlane.pipeline.store.rows import StoredRow
from memlane.pipeline.store.scoring import ScoringQueries
from memlane.pipeline.store.search import Hit, SearchQueries
from memlane.pipeline.store.topics import TopicQueries
from memlane.pipeline.store.upkeep import UpkeepQueries
from memlane.pipeline.store.vectors import VectorIndexQueries
from memlane.pipeline.store.writes import Writes

__all__ = ["Hit", "Store", "StoredRow"]


class Store(
    Connection,
    ModelSettings,
    Writes,
    Reads,
    SearchQueries,
    HandleQueries,
    BrowseQueries,
    TopicQueries,
    UpkeepQueries,
    ScoringQueries,
    GraphQueries,
    VectorIndexQueries,
):
    """The store callers use: ``Store(dsn)``, ``await store.open()``, then any part's queries."""


# Reads, retried once (see _read_again_once). Writes are not: one whose connection died may have
# committed, and its error says so. (A list here rather than decorators, so the methods' own code
# stays as it is; touch only counts accesses, and counting one twice after a crash is harmless.)
for _name in (
    "get_setting", "get", "stats", "search", "candidates", "touch", "server_info", "nearest_ids", "handles",
    "resolve_id", "auto_topics", "access_stats", "category_centroids", "graph_reads", "entity_ids",
):  # fmt: skip
    setattr(Store, _name, _read_again_once(getattr(Store, _name)))
