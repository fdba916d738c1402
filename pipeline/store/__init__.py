"""PostgreSQL + pgvector storage: one schema, one code path, embedded or external server.

``Store`` is composed of one part per role, each in its own module: the connections and their
recovery (connection.py), the embedding model (model.py), the writes (writes.py), and the reads:
whole memories (reads.py), recall's arms (search.py), handles, browsing, topics, scoring, the
graph (graph.py writes it, graph_reads.py reads it), the vector indexes, and ``memlane
maintain``'s queries (maintenance.py), the HTTP rate limit's buckets (limits.py), and the reads
about the store as a whole and its checkpoint (admin.py), and which memory replaced which
(supersession.py)."""

from memlane.pipeline.store.admin import AdminQueries
from memlane.pipeline.store.browse import BrowseQueries
from memlane.pipeline.store.connection import Connections
from memlane.pipeline.store.entity_browse import EntityBrowseQueries
from memlane.pipeline.store.graph import GraphQueries
from memlane.pipeline.store.graph_reads import GraphReadQueries
from memlane.pipeline.store.handles import HandleQueries
from memlane.pipeline.store.limits import RateBuckets
from memlane.pipeline.store.maintenance import MaintenanceQueries
from memlane.pipeline.store.model import ModelSettings
from memlane.pipeline.store.reads import Reads
from memlane.pipeline.store.replicas import WriteMarks
from memlane.pipeline.store.rows import StoredRow
from memlane.pipeline.store.scoring import ScoringQueries
from memlane.pipeline.store.search import Hit, SearchQueries
from memlane.pipeline.store.supersession import SupersessionQueries
from memlane.pipeline.store.topics import TopicQueries
from memlane.pipeline.store.vectors import VectorIndexQueries
from memlane.pipeline.store.writes import Writes

__all__ = ["Hit", "Store", "StoredRow"]


class Store(
    Connections,
    ModelSettings,
    Writes,
    Reads,
    SearchQueries,
    HandleQueries,
    BrowseQueries,
    EntityBrowseQueries,
    TopicQueries,
    MaintenanceQueries,
    ScoringQueries,
    GraphQueries,
    GraphReadQueries,
    VectorIndexQueries,
    WriteMarks,
    RateBuckets,
    AdminQueries,
    SupersessionQueries,
):
    """The store callers use: ``Store(dsn)``, ``await store.open()``, then any part's queries. A
    read whose connection is lost mid-call runs again once the database is back (its part marks it
    ``@read_again_once``, connection.py); a write reports the loss instead."""
