"""Stores as an earlier memlane left them, built with SQL: the schema of version K from the real
migration files 0001..K (recorded in memlane_migrations as migrate.py records them), the vector
column and index the engine of that era set when it recorded its model, and rows written with the
columns and tables that exist at K. Also what tests compare stores by: a fingerprint of the schema,
and a snapshot of every row (with its ctid and xmin, which any write changes).

A new migration makes the store before it one more starting version of test_upgrades.py, at once;
its tables or columns get rows in ``write_era`` for the versions that have them, so that the next
migration's upgrade carries them too."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

import psycopg
from psycopg.types.json import Jsonb

from memlane.pipeline import validate
from memlane.pipeline.store import migrate, vectors

# migrate.migrate's table, as it creates it.
MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS memlane_migrations ("
    " version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
)
# Indexes made per project (store/vectors.py): which exist depends on the data, not the schema.
PER_PROJECT = ("memories_vec_", "memories_tsv_", "passages_vec_")


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 3, day, hour, tzinfo=UTC)


def apply_migrations(conn: psycopg.Connection, version: int) -> None:
    """Migrations 0001..``version``, each in its transaction with its row, as migrate.migrate does."""
    conn.execute(MIGRATIONS_TABLE)
    for v, name, sql in migrate.available():
        if v > version:
            break
        with conn.transaction():
            conn.execute(sql)
            conn.execute("INSERT INTO memlane_migrations (version, name) VALUES (%s, %s)", (v, name))


def record_model(conn: psycopg.Connection, version: int, model_id: str, dim: int) -> None:
    """What that era's ``ensure_model`` left on first use: the model's settings, the column's
    dimension and, before migration 0008, one HNSW index over every project."""
    with conn.transaction():
        conn.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
        if version >= 16:
            conn.execute(f"ALTER TABLE memory_passages ALTER COLUMN embedding TYPE vector({int(dim)})")
        if version < 8:
            conn.execute(
                f"CREATE INDEX {vectors.GLOBAL_INDEX} ON memories USING hnsw (embedding vector_cosine_ops)"
            )
        for k, val in (("embedding_model", model_id), ("embedding_dim", str(dim))):
            conn.execute("INSERT INTO memlane_settings (key, value) VALUES (%s, %s)", (k, val))


def build(dsn: str, version: int, model_id: str, dim: int) -> None:
    """An empty store at ``version`` whose engine has recorded its embedding model."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        apply_migrations(conn, version)
        record_model(conn, version, model_id, dim)


def columns(conn: psycopg.Connection, table: str) -> set[str]:
    return {
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = %s",
            (table,),
        )
    }


def tables(conn: psycopg.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
        )
    ]


def version_of(conn: psycopg.Connection) -> int:
    return conn.execute("SELECT coalesce(max(version), 0) FROM memlane_migrations").fetchone()[0]


def schema(conn: psycopg.Connection, *, per_project: bool = False) -> dict[str, list]:
    """The schema in ``public`` (not pgvector's own objects): columns with their types, defaults
    and generation, constraints, indexes (without the per-project ones unless ``per_project``),
    memlane's functions with a digest of their bodies, triggers."""
    out = {
        "columns": conn.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,"
            " pg_get_expr(d.adbin, d.adrelid), a.attgenerated"
            " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'"
            " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2"
        ).fetchall(),
        "constraints": conn.execute(
            "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint"
            " WHERE connamespace = 'public'::regnamespace ORDER BY 1, 2"
        ).fetchall(),
        "indexes": [
            r
            for r in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
            ).fetchall()
            if per_project or not r[0].startswith(PER_PROJECT)
        ],
        "functions": conn.execute(
            "SELECT p.proname, pg_get_function_identity_arguments(p.oid), md5(p.prosrc) FROM pg_proc p"
            " WHERE p.pronamespace = 'public'::regnamespace AND NOT EXISTS (SELECT 1 FROM pg_depend d"
            " WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e') ORDER BY 1, 2"
        ).fetchall(),
        "triggers": conn.execute(
            "SELECT tgrelid::regclass::text, tgname, pg_get_triggerdef(oid) FROM pg_trigger"
            " WHERE NOT tgisinternal ORDER BY 1, 2"
        ).fetchall(),
    }
    return out


def snapshot(conn: psycopg.Connection) -> dict[str, Any]:
    """Everything a write could change: every table's rows with their ctid and xmin (an UPDATE,
    even one to the same values, moves a row and gives it a new xmin), the schema with the catalog
    rows' xmin of memlane's relations and columns (any DDL rewrites them), and the vector column's
    type."""
    snap: dict[str, Any] = {"schema": schema(conn, per_project=True)}
    for t in tables(conn):
        snap[t] = conn.execute(
            f"SELECT ctid::text, xmin::text, to_jsonb(t) #- '{{embedding}}' #- '{{centroid_sum}}',"
            f" md5(row(t.*)::text) FROM {t} t ORDER BY ctid"
        ).fetchall()
    snap["catalog"] = conn.execute(
        "SELECT c.relname, c.xmin::text, c.relfilenode, a.attname, a.xmin::text FROM pg_class c"
        " LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0"
        " WHERE c.relnamespace = 'public'::regnamespace ORDER BY 1, 4"
    ).fetchall()
    snap["embedding_type"] = conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
        " WHERE attrelid = 'memories'::regclass AND attname = 'embedding'"
    ).fetchone()[0]
    return snap


@dataclass
class Era:
    """What a test wrote into a store of ``version``: the memories as they were written (each a
    dict of the columns it set), and the other rows, keyed as the test compares them."""

    version: int
    memories: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> columns
    access: dict[UUID, tuple[int, datetime]] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    entities: set[tuple] = field(default_factory=set)  # (project, key, name, kind)
    mentions: set[tuple] = field(default_factory=set)  # (memory id, entity key)
    links: set[tuple] = field(default_factory=set)  # (src, kind, dst, weight)
    linked: set[tuple] = field(default_factory=set)  # (memory id, version, linked_at)
    topics: set[tuple] = field(default_factory=set)  # (project, name, created_at)
    summaries: set[tuple] = field(default_factory=set)  # (project, category, summary, source)

    def id(self, key: str) -> UUID:
        return self.memories[key]["id"]


# (key, project, content, other columns). Distinct enough that maintain's merge leaves them apart.
MEMORIES = [
    ("a1", "alpha", "The staging cluster is called Juniper", dict(
        category="infra", tags=["ops", "staging"], metadata={"origin": "remember", "by": "era"},
        pinned=True, priority=1, occurred_at=at(1, 9), created_at=at(2, 10), updated_at=at(5, 12))),
    ("a2", "alpha", "Priya reviews every database migration before it ships", dict(
        created_at=at(3, 8), updated_at=at(3, 8))),
    ("a3", "alpha", "Standup moved to half past nine on Tuesdays", dict(
        source="chat-7", position=0, occurred_at=at(4, 9), created_at=at(4, 10), updated_at=at(4, 10))),
    ("a4", "alpha", "The mobile app ships on the first Monday of the month", dict(
        source="chat-7", position=1, occurred_at=at(4, 9), created_at=at(4, 11), updated_at=at(4, 11))),
    ("b1", "beta", "Invoices are archived for seven years", dict(
        category="finance", expires_at=datetime(2031, 1, 1, tzinfo=UTC), created_at=at(6), updated_at=at(6))),
    ("b2", "beta", "Kenji prefers Rust for command-line tools", dict(
        category="preference", pinned=True, tags=["people"], created_at=at(7), updated_at=at(8))),
]  # fmt: skip
ACCESS = {"a1": (4, at(20)), "a2": (1, at(21))}


def write_era(dsn: str, version: int, embed) -> Era:
    """The era's rows, with SQL valid at ``version``; ``embed(texts)``: the recorded model's vectors."""
    era = Era(version)
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        have = columns(conn, "memories")
        vecs = embed([content for _, _, content, _ in MEMORIES])
        for (key, project, content, extra), vec in zip(MEMORIES, vecs, strict=True):
            row = {"id": uuid4(), "project": project, "content": content, **extra}
            row["content_hash"] = validate.content_hash(content, row.get("occurred_at"))
            row["embedding"] = str(list(vec))
            if key in ACCESS and "access_count" in have:  # before migration 0003
                row["access_count"], row["last_accessed_at"] = ACCESS[key]
            row = {k: val for k, val in row.items() if k in have}
            values = [Jsonb(val) if k == "metadata" else val for k, val in row.items()]
            conn.execute(
                f"INSERT INTO memories ({', '.join(row)}) VALUES ({', '.join(['%s'] * len(row))})", values
            )
            era.memories[key] = row
        era.access = {era.id(k): a for k, a in ACCESS.items()}
        if "access_count" not in have:
            for mid, (n, last) in era.access.items():
                conn.execute("INSERT INTO memory_access VALUES (%s, %s, %s)", (mid, n, last))
        conn.execute(
            "INSERT INTO memlane_settings VALUES ('era.note', %s)", (f"written at schema {version}",)
        )
        if version >= 6:
            _graph(conn, era)
        if version >= 7:
            _topics(conn, era, vecs[3])
        if version >= 8:  # alpha had reached the index threshold of that era
            where = vectors.project_is("project", "alpha", placeholders=False)
            conn.execute(
                f"CREATE INDEX {vectors.index_name('alpha')} ON memories USING hnsw"
                f" (embedding vector_cosine_ops) WITH ({vectors.HNSW_OPTIONS}) WHERE {where}"
            )
            conn.execute(
                "INSERT INTO memlane_vector_indexes (project, index_name) VALUES ('alpha', %s)",
                (vectors.index_name("alpha"),),
            )
        if version >= 9:  # and, since 0009, its full-text index beside it
            conn.execute(
                f"CREATE INDEX {vectors.text_index_name('alpha')} ON memories USING gin (tsv) WHERE {where}"
            )
        if version >= 13:  # a2 states a newer value of a1 (supersession)
            conn.execute(
                "UPDATE memories SET superseded_by = %s, valid_until = %s WHERE id = %s",
                (era.id("a2"), at(5), era.id("a1")),
            )
            era.memories["a1"].update(superseded_by=era.id("a2"), valid_until=at(5))
        if version >= 16:  # a passage of a3 (as if it were long), and alpha's index of passages
            conn.execute(
                f"CREATE INDEX {vectors.passages_index_name('alpha')} ON memory_passages USING hnsw"
                f" (embedding vector_cosine_ops) WITH ({vectors.HNSW_OPTIONS}) WHERE {where}"
            )
            conn.execute(
                "INSERT INTO memory_passages (memory_id, part, project, embedding) VALUES (%s, 1, 'alpha', %s)",
                (era.id("a3"), str(list(vecs[2]))),
            )
        era.settings = dict(conn.execute("SELECT key, value FROM memlane_settings").fetchall())
    return era


def _graph(conn: psycopg.Connection, era: Era) -> None:
    for key, project, ek, name in (("a1", "alpha", "juniper", "Juniper"), ("a2", "alpha", "priya", "Priya"),
                                   ("b2", "beta", "kenji", "Kenji")):  # fmt: skip
        (eid,) = conn.execute(
            "INSERT INTO memlane_entities (project, key, name, kind) VALUES (%s, %s, %s, 'name') RETURNING id",
            (project, ek, name),
        ).fetchone()
        conn.execute("INSERT INTO memory_entities VALUES (%s, %s)", (era.id(key), eid))
        era.entities.add((project, ek, name, "name"))
        era.mentions.add((era.id(key), ek))
    for src, kind, dst, weight in (("a3", "next", "a4", 1.0), ("a2", "relates_to", "a1", 0.5)):
        conn.execute(
            "INSERT INTO memory_links VALUES (%s, %s, %s, %s)", (era.id(src), era.id(dst), kind, weight)
        )
        era.links.add((era.id(src), kind, era.id(dst), weight))
    for m in era.memories.values():
        conn.execute("INSERT INTO memory_linked VALUES (%s, 1, %s)", (m["id"], m["created_at"]))
        era.linked.add((m["id"], 1, m["created_at"]))


def _topics(conn: psycopg.Connection, era: Era, centroid: list[float]) -> None:
    """a1 and b2 were assigned topics on remember; the others wait for maintain's backfill."""
    for key, topics, fact in (("a1", ["infra"], "world"), ("b2", ["preference"], "opinion")):
        conn.execute(
            "UPDATE memories SET topics = %s, fact_type = %s WHERE id = %s", (topics, fact, era.id(key))
        )
        era.memories[key].update(topics=topics, fact_type=fact)
    conn.execute(
        "INSERT INTO memlane_topics (project, name, centroid_sum, members, key_terms, created_at)"
        " VALUES ('alpha', 'releases', %s::vector, 1, '{mobile,app}', %s)",
        (str(list(centroid)), at(4, 11)),
    )
    era.topics.add(("alpha", "releases", at(4, 11)))
    conn.execute(
        "UPDATE category_summaries SET summary = 'Names of the clusters', key_terms = '{staging}',"
        " memory_count = 1, updated_at = %s, pending = 0, source = 'extract'"
        " WHERE project = 'alpha' AND category = 'infra'",
        (at(9),),
    )
    era.summaries.add(("alpha", "infra", "Names of the clusters", "extract"))


def big(dsn: str, n: int) -> None:
    """``n`` memories in two projects, without vectors, in one statement (an era store to upgrade
    slowly: migration 0002 reads every memory's lexemes; about 2 s at 50,000 here)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO memories (project, content, content_hash)"
            " SELECT 'p' || (i %% 2), 'memory ' || i || ' about ' || md5(i::text) || ' with word'"
            " || (i %% 977) || ' and term' || (i %% 131), md5('h' || i) FROM generate_series(1, %s) i",
            (n,),
        )
