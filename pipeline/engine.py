"""The engine: the front that the MCP server, the CLI and the benchmarks share. Each method is one
thing a caller asks of memlane (remember, ingest, recall, update, forget, ...): it checks the
caller's access (``access.py``) and hands the request to the write path (``remember/write.py``,
``remember/ingest.py``) or to the recall stages (``recall/run.py``), with recall routed to a read
replica when there is one. What it runs on (the database, the models, their start-up and
shutdown) is the ``Runtime`` (``runtime.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any
from uuid import UUID

from memlane.pipeline import access, maintain
from memlane.pipeline import validate as v
from memlane.pipeline.access import Principal
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import InvalidInput, NotFound, StoreError
from memlane.pipeline.llm.service import LLMService
from memlane.pipeline.providers.embedding.base import Embedder
from memlane.pipeline.providers.llm.base import LLM
from memlane.pipeline.recall import run
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.query import RecallQuery, asks_every_project
from memlane.pipeline.records import Memory, Recalled, Remembered
from memlane.pipeline.remember import ingest, topics_llm, write
from memlane.pipeline.remember.context import WriteContext
from memlane.pipeline.remember.ingest import IngestResult, Progress
from memlane.pipeline.remember.inputs import IngestRequest, MemoryInput, MemoryPatch
from memlane.pipeline.remember.summaries import CategorySummary, category_summaries
from memlane.pipeline.runtime import Runtime
from memlane.pipeline.store import Store, replicas
from memlane.pipeline.supersession import history, judge, marks, undo

log = logging.getLogger(__name__)


# What the instructions resource lists at most: a client loads it whole into a chat's context.
INSTRUCTIONS_LISTED = 50


class Engine:
    """``runtime``: what it runs on, built from ``config`` (``embedder`` and ``llm`` replace the
    configured embedding model and default LLM provider). ``open`` and ``close`` are the
    runtime's: an engine is usable between them."""

    def __init__(
        self, config: EngineConfig, *, embedder: Embedder | None = None, llm: LLM | None = None
    ) -> None:
        self.runtime = Runtime(config, embedder=embedder, llm=llm)

    @property
    def config(self) -> EngineConfig:
        return self.runtime.config

    @config.setter
    def config(self, config: EngineConfig) -> None:
        """Another configuration from the next call on (tests and the benchmark's variants)."""
        self.runtime.config = config

    @property
    def store(self) -> Store:
        store = self.runtime.store
        if store is None:
            raise StoreError("the engine is not open: call engine.open() first")
        return store

    @property
    def embedder(self) -> Embedder:
        return self.runtime.embedder

    @embedder.setter
    def embedder(self, embedder: Embedder) -> None:
        self.runtime.embedder = embedder

    @property
    def llm(self) -> LLMService | None:
        return self.runtime.llm

    @llm.setter
    def llm(self, llm: LLMService | None) -> None:
        self.runtime.llm = llm

    async def open(self, *, check_model: bool = True, follow_store: bool | None = None) -> None:
        await self.runtime.open(check_model=check_model, follow_store=follow_store)

    async def close(self) -> None:
        await self.runtime.close()

    # -- what callers ask ----------------------------------------------------------------------------------

    def write_context(self) -> WriteContext:
        """What the write steps use (pipeline/remember/context.py), as the runtime has them now."""
        rt = self.runtime
        return WriteContext(
            config=rt.config,
            store=self.store,
            embedder=rt.embedder,
            topics=rt.topics,
            llm=rt.llm,
            topics_llm=topics_llm.for_write(rt.llm, rt.topics, rt.config.llm),
            supersede_llm=judge.for_write(rt.llm, rt.config.llm),
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
        request: IngestRequest | dict[str, Any],
        *,
        progress: Progress | None = None,
        principal: Principal | None = None,
    ) -> IngestResult:
        """A conversation or a document in, memories out: split, filter, check novelty, store
        (``pipeline/remember/ingest.py``). ``request``: an ``IngestRequest`` or its fields as a
        caller gave them. ``progress(done, total)`` follows the embedding of long inputs."""
        out = await ingest.ingest(
            self.write_context(),
            IngestRequest.parse(self.config, request),
            progress=progress,
            principal=principal,
        )
        await self._written()
        return out

    async def _written(self) -> None:
        """Read-your-writes with read replicas: after the calling client's write, where the
        primary's WAL is (``replicas.py``); its next recall reads a replica that has replayed it."""
        if self.runtime.replicas is not None:
            await self.runtime.replicas.note_write(replicas.CALLER.get())

    async def project_names(self) -> list[str]:
        """Every project that has memories (what ``"*"`` expands to before access rules apply)."""
        return [p.project for p in await self.store.project_summaries()]

    async def recall(
        self,
        query: RecallQuery | dict[str, Any],
        *,
        principal: Principal | None = None,
        sampling: LLM | None = None,
    ) -> Recalled:
        """Run the nine stages for ``query`` (a ``RecallQuery``, or the recall tool's arguments as
        a dict); ``principal``: the caller (None: the local user), who must be allowed every
        project it searches; ``sampling``: the calling MCP session's model, for the stages
        configured with ``provider = "sampling"``. Each memory returned counts an access unless
        the query says not to (``count_accesses``) or the recall waits for the client's model."""
        if not isinstance(query, RecallQuery):
            every = await self.project_names() if asks_every_project(query.get("project")) else None
            query = RecallQuery.parse(self.config, query, principal=principal, every_project=every)
        for name in query.searched_projects:
            access.check(principal, name)

        def context() -> RecallContext:
            return RecallContext(
                config=self.config,
                store=self.store,
                embedder=self.embedder,
                llm=self.llm.with_sampling(sampling) if self.llm is not None else None,
                request=query,
            )

        result = await self._routed(context)
        if query.count_accesses and not result.deferred and result.memories:
            try:
                await self.store.count_accesses([m.id for m, _ in result.memories])
            except StoreError as e:  # best effort: the answer is already there
                log.warning("could not count the accesses of a recall: %s", e)
        return result

    async def _routed(self, context: Callable[[], RecallContext]) -> Recalled:
        """The recall on a read replica when ``database.read_urls`` has one up and caught up with
        the caller's last write, else on the primary; one whose replica fails midway runs again on
        the primary (it only reads). The explained trace says where it read (``read_from``)."""
        reps = self.runtime.replicas
        if reps is None:
            return await run.recall(context())
        route = await reps.route(replicas.CALLER.get())
        result = None
        if route.read_from == "replica":
            token = replicas.routed(route)
            try:
                result = await run.recall(context())
            except replicas.ReplicaLost:
                pass
            finally:
                replicas.unrouted(token)
            if route.failed:
                route.fell_back()
                result = None
        if result is None:
            result = await run.recall(context())
        result.trace.read = route.trace()
        return result

    # By id: a memory in a project the principal may not use is, to it, a missing id (same error).

    async def get(self, memory_id: str | UUID, *, principal: Principal | None = None) -> Memory:
        return await self.store.get(await self.store.resolve_id(memory_id, await self._scope(principal)))

    async def forget(self, memory_id: str | UUID, *, principal: Principal | None = None) -> Memory:
        forgotten = await self.store.delete(
            await self.store.resolve_id(memory_id, await self._scope(principal))
        )
        await self._written()
        return forgotten

    # Supersession by hand (pipeline/supersession/): the ids resolve within the caller's projects.

    async def supersede(
        self, old_id: str | UUID, new_id: str | UUID | None, *, principal: Principal | None = None
    ) -> Memory:
        """A user's fix of supersession (``memlane supersede``): ``old`` is superseded by ``new``,
        whatever the detector decided. Refused for one memory twice, two projects, or a ``new``
        that ``old`` already supersedes down its chain. ``new_id`` None is ``unsupersede``, as it
        was before that method existed. Returns ``old`` as it now is."""
        if new_id is None:
            return await self.unsupersede(old_id, principal=principal)
        scope = await self._scope(principal)
        old = await self.store.resolve_id(old_id, scope)
        new = await self.store.resolve_id(new_id, scope)
        changed = await undo.supersede(self.store, old, new)
        await self._written()
        return changed

    async def unsupersede(self, memory_id: str | UUID, *, principal: Principal | None = None) -> Memory:
        """Undo a mark (``memlane unsupersede``): the memory is current again. Returns it."""
        old = await self.store.resolve_id(memory_id, await self._scope(principal))
        current = await undo.unsupersede(self.store, old)
        await self._written()
        return current

    async def restore_marks(
        self,
        exported: list[marks.Exported],
        stored: list[str | UUID],
        *,
        principal: Principal | None = None,
    ) -> marks.Restored:
        """An import's marks (``superseded_by``, ``conflicts_with``, by the export's ids) set again
        between the memories it stored: ``exported[i]`` was stored as ``stored[i]``. ``principal``
        must be allowed the projects of every memory a mark touches."""
        if len(exported) != len(stored):
            raise InvalidInput(f"{len(exported)} exported memories for {len(stored)} stored ones")
        scope = await self._scope(principal)
        ids = [mid if isinstance(mid, UUID) else await self.store.resolve_id(mid, scope) for mid in stored]
        # Only the memories a mark touches are read: an import of many memories has few marks. One
        # in a project the principal may not use is, to it, a missing id.
        touched = marks.touched(exported, ids)
        found = {
            mid: m
            for mid, m in (await self.store.memories_by_id(list(touched))).items()
            if scope is None or m.project in scope
        }
        if missing := touched - found.keys():
            raise NotFound(f"no memory has id {min(missing)}")
        restored = await marks.restore(
            self.store, exported, ids, {mid: m.project for mid, m in found.items()}
        )
        await self._written()
        return restored

    async def history(self, memory_id: str | UUID, *, principal: Principal | None = None) -> dict[str, Any]:
        """What memlane keeps of a memory's past (``pipeline/supersession/history.py``): the contents
        its updates replaced (``versions``, oldest first), the memories it superseded
        (``supersedes``, newest first) and the one that supersedes it now (``superseded_by``, the
        end of its chain)."""
        mid = await self.store.resolve_id(memory_id, await self._scope(principal))
        return await history.history(self.store, mid)

    async def update(
        self,
        memory_id: str | UUID,
        changes: MemoryPatch | dict[str, Any],
        *,
        principal: Principal | None = None,
    ) -> Memory:
        """Change some fields of a memory; new content is re-embedded. ``None`` means unchanged.
        ``memory_id``: its id or a handle (``MemoryRef``, as forget and ``get`` take it too)."""
        fields = MemoryPatch.parse(self.config, changes).changes()
        mid = await self.store.resolve_id(memory_id, await self._scope(principal))
        updated = await write.update(self.write_context(), mid, fields)
        await self._written()
        return updated

    async def reembed(self, batch_size: int = 256, progress: Callable[[int], object] | None = None) -> int:
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
        s["database"] = self.runtime.dsn_kind
        s["llm"] = self.llm.stats() if self.llm is not None else {"provider": "none"}
        if scope is not None:  # LLM usage and cache size count every caller's recalls
            s["llm"] = {k: val for k, val in s["llm"].items() if k not in ("usage", "cache_entries")}
        return s

    async def instructions(self, project: str | None, *, principal: Principal | None = None) -> list[Memory]:
        """The project's current standing instructions and preferences, newest first (at most
        ``INSTRUCTIONS_LISTED``); ``principal`` must be allowed the project."""
        name = v.project_name(project, self.config.default_project)
        access.check(principal, name)
        return [m for m, _ in await self.store.instructions((name,), None, INSTRUCTIONS_LISTED)]

    async def category_summaries(
        self, project: str | None, *, principal: Principal | None = None
    ) -> list[CategorySummary]:
        """The project's category summaries (refreshed first when enough changed); ``principal``
        must be allowed the project."""
        name = v.project_name(project, self.config.default_project)
        access.check(principal, name)
        return await category_summaries(self.store, name, self.config.summaries)
