"""The embedding model the stored vectors come from: recorded on first use, checked by every write
of vectors, switched (every vector cleared) by ``memlane reembed``."""

from __future__ import annotations

import logging
from collections.abc import Collection

import psycopg

from memlane.pipeline.errors import ModelMismatch
from memlane.pipeline.store import migrate as migrations
from memlane.pipeline.store import vectors
from memlane.pipeline.store.base import StorePart, one_row
from memlane.pipeline.store.connection import read_again_once

log = logging.getLogger(__name__)


class ModelSettings(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    @read_again_once
    async def get_setting(self, key: str) -> str | None:
        async with self._connection() as conn:
            cur = await conn.execute("SELECT value FROM memlane_settings WHERE key = %s", (key,))
            row = await cur.fetchone()
            value: str | None = row[0] if row else None
            return value

    async def ensure_model(self, model_id: str, dim: int, same: Collection[str] = ()) -> None:
        """Record the embedding model on first use; refuse a different one against stored vectors.
        ``same``: other model ids whose vectors are this model's (a store recorded with one of them
        is kept as it is)."""
        async with self._connection() as conn, migrations.schema_lock(conn):
            cur = await conn.execute(
                "SELECT key, value FROM memlane_settings WHERE key IN ('embedding_model', 'embedding_dim')"
            )
            have: dict[str, str] = dict(await cur.fetchall())
            accepted = {model_id, *same}
            if have.get("embedding_model") in accepted and have.get("embedding_dim") == str(dim):
                async with conn.transaction():
                    if await vectors.replace_global_index(conn):
                        log.info("the vector index over every project is now one index per project")
                return
            if have:
                cur = await conn.execute("SELECT count(*) FROM memories WHERE embedding IS NOT NULL")
                (n,) = await one_row(cur)
                if n:
                    raise ModelMismatch(
                        f"the store holds {n} memories embedded with {have.get('embedding_model')} "
                        f"({have.get('embedding_dim')} dimensions) but the configured model is {model_id} "
                        f"({dim}). Run `memlane reembed` to re-embed them with the configured model, or "
                        "configure the recorded model again."
                    )
            await self._set_vector_column(conn, model_id, dim)

    async def _set_vector_column(self, conn: psycopg.AsyncConnection, model_id: str, dim: int) -> None:
        async with conn.transaction():
            # The model's row first: writers share-lock it before touching memories (_check_model),
            # so taking it before the table keeps one lock order and no deadlock.
            await conn.execute("SELECT 1 FROM memlane_settings WHERE key = 'embedding_model' FOR UPDATE")
            indexed = await vectors.drop_all(conn)
            await conn.execute("UPDATE memories SET embedding = NULL WHERE embedding IS NOT NULL")
            await conn.execute(f"ALTER TABLE memories ALTER COLUMN embedding TYPE vector({int(dim)})")
            # Passages are the old model's too: `memlane reembed` (or the task) makes them again.
            await conn.execute("DELETE FROM memory_passages")
            await conn.execute(f"ALTER TABLE memory_passages ALTER COLUMN embedding TYPE vector({int(dim)})")
            # Automatic topics' centroids are sums of the old model's vectors: they start again.
            await conn.execute("DELETE FROM memlane_topics")
            await vectors.recreate(conn, indexed)
            for k, v in (("embedding_model", model_id), ("embedding_dim", str(dim))):
                await conn.execute(
                    "INSERT INTO memlane_settings (key, value) VALUES (%s, %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (k, v),
                )
        log.info("embedding column set to vector(%d) for %s", dim, model_id)

    async def switch_model(self, model_id: str, dim: int) -> None:
        """For reembed: clear every vector and record the new model (under the migration lock)."""
        async with self._connection() as conn, migrations.schema_lock(conn):
            await self._set_vector_column(conn, model_id, dim)

    @staticmethod
    async def _check_model(conn: psycopg.AsyncConnection, model_id: str | Collection[str]) -> None:
        """Refuse vectors of another model than the recorded one (``model_id``: the id, or every id
        whose vectors the writer's match). The row is share-locked until the write commits, so
        ``switch_model`` (which locks it first) cannot slip in between."""
        accepted = {model_id} if isinstance(model_id, str) else set(model_id)
        cur = await conn.execute("SELECT value FROM memlane_settings WHERE key = 'embedding_model' FOR SHARE")
        row = await cur.fetchone()
        if row is None or row[0] not in accepted:
            raise ModelMismatch(
                f"the store's embedding model is now {row[0] if row else 'unset'} (changed by `memlane "
                f"reembed` while this process was running) but this process embeds with {' / '.join(sorted(accepted))}: "
                "nothing was written. Restart memlane configured with the store's model."
            )

    # Columns update() may set: the fields of MemoryPatch and the vector of new content.
