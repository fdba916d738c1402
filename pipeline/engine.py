"""The engine: configuration, store and models behind one object that the server, CLI and
benchmark share. Start-up is split so the MCP server can answer at once while the database
starts and the embedding model loads in the background.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import recall as recall_pipeline
from . import remember as remember_path
from . import validate as v
from .config import EngineConfig
from .errors import InvalidInput
from .providers.embedder import Embedder, make_embedder
from .records import Memory, RecallRequest, RecallResult
from .store import Store
from .store.embedded import start_embedded

log = logging.getLogger(__name__)

BUDGETS = ("low", "mid", "high")


def default_data_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir("memlane", appauthor=False))


class Engine:
    def __init__(self, config: EngineConfig, *, embedder: Embedder | None = None) -> None:
        self.config = config
        self.embedder = embedder or make_embedder(config.embedding)
        self.store: Store | None = None
        self.llm = None  # LLM providers arrive with a later issue; stages that need one are skipped
        self.dsn_kind = "external" if config.database.url else "embedded"
        self._opened = False

    @property
    def data_dir(self) -> Path:
        return Path(self.config.data_dir or default_data_dir()).expanduser()

    async def open(self, *, check_model: bool = True) -> None:
        """Start/join the database, apply migrations, check the embedding model. Idempotent.
        ``check_model=False`` is for ``memlane reembed``, which replaces the recorded model."""
        if self._opened:
            return
        if self.config.database.url is not None:
            dsn = self.config.database.url.get_secret_value()
        else:
            dsn = await asyncio.to_thread(start_embedded, self.data_dir)
        db = self.config.database
        store = Store(dsn, pool_min=db.pool_min, pool_max=db.pool_max, timeout=db.connect_timeout)
        await store.open()
        if check_model:
            try:
                await store.ensure_model(self.embedder.model_id, self.embedder.dim)
            except Exception:
                await store.close()
                raise
        self.store = store
        self._opened = True

    async def close(self) -> None:
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

    async def remember(self, **item: Any) -> dict[str, Any]:
        [out] = await self.remember_many([item])
        return out

    async def remember_many(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        drafts = [remember_path.draft(self.config, it) for it in items]
        results = await remember_path.store_drafts(self.store, self.embedder, drafts)
        return [
            {"id": str(mid), "status": "created" if created else "duplicate", "project": d.project}
            for d, (mid, created) in zip(drafts, results, strict=True)
        ]

    def recall_request(
        self,
        query: Any,
        *,
        project: Any = None,
        limit: Any = None,
        max_tokens: Any = None,
        budget: Any = "mid",
        reference_time: Any = None,
        category: Any = None,
        tags: Any = None,
        explain: bool = False,
    ) -> RecallRequest:
        cfg = self.config.recall
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput(
                "query is empty: ask in words what you want to remember, e.g. 'user's editor preferences'"
            )
        if len(query) > cfg.max_query_chars:
            raise InvalidInput(f"query is {len(query)} characters; the maximum is {cfg.max_query_chars}")
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
        now = v.parse_datetime(reference_time, "reference_time") or datetime.now(UTC)
        return RecallRequest(
            query=query.strip(),
            project=v.project_name(project, self.config.default_project),
            reference_time=now,
            limit=limit,
            max_tokens=max_tokens,
            budget=budget,
            category=v.category_name(category),
            tags=v.tag_list(tags, self.config.remember.max_tags),
            explain=bool(explain),
        )

    async def recall(
        self, req: RecallRequest, *, arms: tuple[str, ...] | None = None, touch: bool = True
    ) -> RecallResult:
        kwargs = {"arms": arms} if arms else {}
        result = await recall_pipeline.recall(self, req, **kwargs)
        if touch:
            await self.store.touch([m.id for m, _ in result.memories])
        return result

    async def get(self, memory_id: Any) -> Memory:
        return await self.store.get(await self.store.resolve_id(memory_id))

    async def forget(self, memory_id: Any) -> Memory:
        return await self.store.delete(await self.store.resolve_id(memory_id))

    async def update(self, memory_id: Any, changes: dict[str, Any]) -> Memory:
        """Change some fields of a memory; new content is re-embedded. ``None`` means unchanged."""
        mid = await self.store.resolve_id(memory_id)
        changes = {k: val for k, val in changes.items() if val is not None}
        allowed = set(remember_path.FIELDS) - {"project", "source"}
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise InvalidInput(f"cannot update {', '.join(unknown)}; updatable: {', '.join(sorted(allowed))}")
        if not changes:
            raise InvalidInput(f"nothing to update: give at least one of {', '.join(sorted(allowed))}")
        current = await self.store.get(mid)
        rc = self.config.remember
        fields: dict[str, Any] = {}
        if "content" in changes:
            fields["content"] = v.content_text(changes["content"], rc.max_content_chars)
        if "occurred_at" in changes:
            fields["occurred_at"] = v.parse_datetime(changes["occurred_at"], "occurred_at")
        if "expires_at" in changes:
            fields["expires_at"] = v.parse_datetime(changes["expires_at"], "expires_at")
        if "category" in changes:
            fields["category"] = v.category_name(changes["category"])
        if "tags" in changes:
            fields["tags"] = v.tag_list(changes["tags"], rc.max_tags)
        if "metadata" in changes:
            fields["metadata"] = v.metadata_object(changes["metadata"], rc.max_metadata_bytes)
        if "pinned" in changes:
            if not isinstance(changes["pinned"], bool):
                raise InvalidInput("pinned must be true or false")
            fields["pinned"] = changes["pinned"]
        if "priority" in changes:
            fields["priority"] = v.priority_value(changes["priority"])
        if "content" in fields or "occurred_at" in fields:
            content = fields.get("content", current.content)
            occurred = fields.get("occurred_at", current.occurred_at)
            fields["content_hash"] = v.content_hash(content, occurred)
        if "content" in fields:
            [fields["embedding"]] = await asyncio.to_thread(self.embedder.embed_batch, [fields["content"]])
        return await self.store.update(mid, fields)

    async def reembed(self, batch_size: int = 256, progress=None) -> int:
        """Give every memory a vector from the configured model; resumable (only memories without a
        vector are embedded, so an interrupted run continues where it stopped)."""
        recorded = await self.store.get_setting("embedding_model")
        recorded_dim = await self.store.get_setting("embedding_dim")
        if recorded != self.embedder.model_id or recorded_dim != str(self.embedder.dim):
            await self.store.switch_model(self.embedder.model_id, self.embedder.dim)
        done = 0
        async for batch in self.store.iter_memories(batch=batch_size, missing_embedding=True):
            vectors = await asyncio.to_thread(self.embedder.embed_batch, [m.content for m in batch])
            await self.store.set_embeddings([(m.id, vec) for m, vec in zip(batch, vectors, strict=True)])
            done += len(batch)
            if progress:
                progress(len(batch))
        return done

    async def stats(self) -> dict[str, Any]:
        s = await self.store.stats()
        s["configured_model"] = self.embedder.model_id
        s["database"] = self.dsn_kind
        return s
