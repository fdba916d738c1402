"""One HNSW index and one full-text (GIN) index per project: every search names one project.

A single HNSW index over every project made each search filter its way through the others' vectors:
pgvector's iterative scan visits about ``ef_search / share`` nodes, so a search in a small project
cost several times one in a large project, and every remember pays one per new memory (its
``relates_to`` links). A partial index per project (``WHERE project = '...'``) holds that project's
vectors only: a search costs the same whatever the project's share, and its top 5 matched the exact
ones better.

A project gets its index once it holds ``PROJECT_INDEX_MIN`` memories (``Store.insert`` creates it
before the write that finds it there); a smaller one is searched exactly (PostgreSQL reads it through
the project's b-tree and sorts, ``nearest_many`` in numpy), which costs about what an HNSW search does
at that size and keeps the number of indexes on ``memories`` to the projects that need one.

``m = 8, ef_construction = 32`` (pgvector's defaults: 16, 64): a new memory's insertion into the
index costs about half as much, and the top 50 of a recall-side search (``ef_search`` 100) matched
the exact top 50 as often.

The project's full-text index serves the keyword arm the same way. With one GIN index over every
project, the arm's candidates were the index's matches ANDed with a bitmap of the project's rows from
its b-tree, and that bitmap and the global posting lists were over a quarter of a keyword query; the
project's own index needs neither. The keyword arm runs while the question is embedded, on the
same machine's cores, so what it saves also comes off the embedding. A project below ``PROJECT_INDEX_MIN`` is read through its
b-tree and its few rows checked one by one. Migration 0009 gave the indexed projects theirs and
dropped the index over every project; ``memlane reembed`` drops and recreates only the vector ones.

The planner uses a partial index only when it can see the project the query names, so queries
write the project into their text (``project_is``) rather than pass it as a parameter: a server-side
prepared statement's generic plan would not know it.
"""

from __future__ import annotations

import hashlib
import logging
import time

import psycopg
from psycopg import sql

from memlane.pipeline.store.base import StorePart, one_row

log = logging.getLogger(__name__)

PROJECT_INDEX_MIN = 1000
INDEX_RECHECK_S = 60.0
HNSW_OPTIONS = "m = 8, ef_construction = 32"
# pg_advisory_xact_lock(class, hashtext(project)) while a project's index is created.
INDEX_LOCK_CLASS = 0x6D6C7669
# CREATE INDEX waits for the writes under way and holds writers back while it reads the table; a
# project whose index cannot start within this long is searched exactly until a later write.
INDEX_LOCK_TIMEOUT = "5s"
# The index over every project that stores before migration 0008 had.
GLOBAL_INDEX = "memories_embedding_hnsw"


def _digest(project: str) -> str:
    """A project's part of its indexes' names (PostgreSQL names stop at 63 bytes); migration 0009
    computes the same in SQL."""
    return hashlib.sha256(project.encode()).hexdigest()[:24]


def index_name(project: str) -> str:
    """The project's vector index."""
    return "memories_vec_" + _digest(project)


def passages_index_name(project: str) -> str:
    """The project's index of its long memories' passages (migration 0016)."""
    return "passages_vec_" + _digest(project)


def text_index_name(project: str) -> str:
    """The project's full-text index (the keyword arm's)."""
    return "memories_tsv_" + _digest(project)


def project_is(column: str, project: str, *, placeholders: bool = True) -> str:
    """The condition ``column = '<project>'``, with the name in the text (see the module's note), for
    a statement executed with parameters (its % doubled, as psycopg then reads %s placeholders) or,
    ``placeholders=False``, without."""
    literal = sql.Literal(project).as_string(None)
    return f"{column} = {literal.replace('%', '%%') if placeholders else literal}"


async def create_index(conn: psycopg.AsyncConnection, project: str) -> None:
    """Create the project's indexes (those missing) and record them, on ``conn``'s transaction."""
    where = project_is("project", project, placeholders=False)
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {index_name(project)} ON memories"
        f" USING hnsw (embedding vector_cosine_ops) WITH ({HNSW_OPTIONS}) WHERE {where}"
    )
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {passages_index_name(project)} ON memory_passages"
        f" USING hnsw (embedding vector_cosine_ops) WITH ({HNSW_OPTIONS}) WHERE {where}"
    )
    await conn.execute(
        f"CREATE INDEX IF NOT EXISTS {text_index_name(project)} ON memories USING gin (tsv) WHERE {where}"
    )
    await conn.execute(
        "INSERT INTO memlane_vector_indexes (project, index_name) VALUES (%s, %s) ON CONFLICT (project) DO NOTHING",
        (project, index_name(project)),
    )


async def has_index(conn: psycopg.AsyncConnection, project: str) -> bool:
    """Whether the registry lists the project's indexes."""
    cur = await conn.execute("SELECT 1 FROM memlane_vector_indexes WHERE project = %s", (project,))
    return await cur.fetchone() is not None


async def indexed_projects(conn: psycopg.AsyncConnection) -> list[str]:
    cur = await conn.execute("SELECT project FROM memlane_vector_indexes ORDER BY project")
    return [r[0] for r in await cur.fetchall()]


async def drop_all(conn: psycopg.AsyncConnection) -> list[str]:
    """Drop every vector index (the registry keeps its rows, the full-text indexes stay); returns
    the indexed projects."""
    projects = await indexed_projects(conn)
    for p in projects:
        await conn.execute(f"DROP INDEX IF EXISTS {index_name(p)}")
        await conn.execute(f"DROP INDEX IF EXISTS {passages_index_name(p)}")
    await conn.execute(f"DROP INDEX IF EXISTS {GLOBAL_INDEX}")
    return projects


async def recreate(conn: psycopg.AsyncConnection, projects: list[str]) -> None:
    for p in projects:
        await create_index(conn, p)


async def replace_global_index(conn: psycopg.AsyncConnection) -> bool:
    """A store from before migration 0008: one index per project of at least ``PROJECT_INDEX_MIN``
    memories instead of the index over all of them. On ``conn``'s transaction; False if there was
    nothing to replace."""
    cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", (GLOBAL_INDEX,))
    if not (await one_row(cur))[0]:
        return False
    cur = await conn.execute(
        "SELECT project FROM memories GROUP BY project HAVING count(*) >= %s ORDER BY project",
        (PROJECT_INDEX_MIN,),
    )
    projects = [r[0] for r in await cur.fetchall()]
    # HNSW builds fast while its graph fits in maintenance_work_mem (64 MB by default): a project of
    # 100,000 memories needs ~200 MB. For this transaction only.
    await conn.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for i, p in enumerate(projects, 1):
        log.info("creating the indexes of project %r (%d of %d)", p, i, len(projects))
        await create_index(conn, p)
    await conn.execute(f"DROP INDEX {GLOBAL_INDEX}")
    return True


class VectorIndexQueries(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    _indexed: set[str]
    _below: dict[str, tuple[int, float]]  # project -> (rows counted or written since, count expiry)
    _unindexed: dict[str, float]  # project -> until when it is taken to have no index

    async def is_indexed(self, conn: psycopg.AsyncConnection, project: str) -> bool:
        """``has_index``, remembered once true (an index is dropped only to be made again), and
        for ``INDEX_RECHECK_S`` when false: a project indexed meanwhile by another server is searched
        exactly a while longer, the same answers."""
        if project in self._indexed:
            return True
        now = time.monotonic()
        if self._unindexed.get(project, 0.0) > now:
            return False
        if not await has_index(conn, project):
            self._unindexed[project] = now + INDEX_RECHECK_S
            return False
        self._indexed.add(project)
        return True

    def known_indexed(self, project: str) -> bool:
        """Whether ``is_indexed`` has found the project's index already (no statement)."""
        return project in self._indexed

    def _counted_lately(self, project: str, rows: int, now: float) -> bool:
        """True while a project counted below ``PROJECT_INDEX_MIN`` cannot have reached it: what
        this process wrote since is counted; other servers' writes are why a count expires."""
        seen = self._below.get(project)
        if seen is None:
            return False
        count, until = seen  # (rows before the last write counted, plus every write since)
        if count >= PROJECT_INDEX_MIN or now >= until:
            del self._below[project]
            return False
        self._below[project] = (count + rows, until)
        return True

    async def index_projects(self, projects: set[str] | dict[str, int]) -> None:
        """Give each of these projects its indexes once it holds ``PROJECT_INDEX_MIN`` memories
        (``projects``: the projects about to be written to, or each with its number of new rows).
        Before a write, in a transaction of its own: it only ever waits ``INDEX_LOCK_TIMEOUT`` for
        the table, and a project left without an index is still searched (exactly)."""
        now = time.monotonic()
        rows = projects if isinstance(projects, dict) else dict.fromkeys(projects, 1)
        todo = sorted(
            p for p, n in rows.items() if p not in self._indexed and not self._counted_lately(p, n, now)
        )
        if not todo:
            return
        async with self._connection() as conn:
            cur = await conn.execute(
                "SELECT q.p, EXISTS (SELECT 1 FROM memlane_vector_indexes v WHERE v.project = q.p),"
                " (SELECT count(*) FROM (SELECT 1 FROM memories m WHERE m.project = q.p LIMIT %s) c)"
                " FROM unnest(%s::text[]) AS q(p)",
                (PROJECT_INDEX_MIN, todo),
            )
            found = await cur.fetchall()
            self._indexed.update(p for p, known, _ in found if known)
            # A project below the threshold is not counted again until this process's own writes
            # could have taken it there, or INDEX_RECHECK_S passed (other servers write too): the
            # count cost a remember 0.8 ms, and a late index only means exact search a while longer.
            for p, known, n in found:
                if not known and n < PROJECT_INDEX_MIN:
                    self._below[p] = (n + rows[p], now + INDEX_RECHECK_S)
            for project in (p for p, known, n in found if not known and n >= PROJECT_INDEX_MIN):
                try:
                    async with conn.transaction():
                        await conn.execute(
                            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (INDEX_LOCK_CLASS, project)
                        )
                        await conn.execute(f"SET LOCAL lock_timeout = '{INDEX_LOCK_TIMEOUT}'")
                        await create_index(conn, project)
                except psycopg.errors.LockNotAvailable:
                    log.info("the indexes of project %r wait for a quieter moment", project)
                    continue
                log.info("created the indexes of project %r", project)
                self._indexed.add(project)
                self._unindexed.pop(project, None)
