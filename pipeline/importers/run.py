"""An import, from a reader's records to stored memories: conversations and documents through
ingest (split, filtered, checked for novelty, one ``source`` each, ``occurred_at`` from the
export), facts and notes through remember in batches (topics, entities, links, supersession), and
the counts of what happened.

Where a memory came from: its ``source`` (``<format>:<conversation id>`` for a conversation,
``<format>:<file name>`` for facts) and, for facts, ``imported_from`` and ``original_id`` in its
metadata, where users see them (nothing reads the metadata back). A second import of the same
input adds nothing: a fact is refused as memlane refuses any repeat (the same content at the same
time in a project), and a conversation or document whose ``source`` memlane already has is skipped
whole (ingest stores a conversation in one transaction, so one with memories is complete).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memlane.pipeline import validate as v
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.importers.records import Conversation, Document, Fact, Message, Record, Skip
from memlane.pipeline.remember.inputs import MemoryInput

BATCH = 256


@dataclass
class ImportReport:
    """``read``: the messages, facts and documents read (skipped ones not counted); ``stored``,
    ``duplicate``, ``filtered``: what memlane did with them (a long message may be several pieces);
    ``skipped``: what the export holds that is not imported, by reason."""

    format: str
    detected: str | None = None
    dry_run: bool = False
    read: int = 0
    stored: int = 0
    duplicate: int = 0
    filtered: int = 0
    to_import: int = 0  # dry run: what would be handed to memlane
    conversations: int = 0
    already_imported: int = 0  # conversations and documents whose source memlane has
    skipped: Counter[str] = field(default_factory=Counter)
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format}
        if self.detected:
            out["detected"] = self.detected
        out.update(
            read=self.read,
            stored=self.stored,
            duplicate=self.duplicate,
            filtered=self.filtered,
            skipped=sum(self.skipped.values()),
            skipped_reasons=dict(self.skipped.most_common()),
        )
        if self.conversations:
            out["conversations"] = self.conversations
        if self.already_imported:
            out["already_imported"] = self.already_imported
        if self.dry_run:
            out["dry_run"] = True
            out["to_import"] = self.to_import
        out.update(self.extra)
        return out

    def line(self) -> str:
        """The one-line summary."""
        what = f"{self.format} ({self.detected})" if self.detected else self.format
        if self.dry_run:
            head = f"dry run, nothing stored: {what}: read {self.read}, would import {self.to_import}"
        else:
            head = (
                f"imported {what}: read {self.read}, stored {self.stored}, duplicate {self.duplicate}, "
                f"filtered {self.filtered}"
            )
        skipped = sum(self.skipped.values())
        if skipped:
            reasons = ", ".join(f"{r} {n}" for r, n in self.skipped.most_common())
            head += f", skipped {skipped} ({reasons})"
        else:
            head += ", skipped 0"
        return head


def _clean_tags(tags: Iterable[str], limit: int) -> list[str]:
    out: list[str] = []
    for t in tags:
        t = " ".join(t.split()).lower()[:64]
        if t and t not in out:
            out.append(t)
    return out[:limit]


class Importer:
    """Hands records to the engine; ``progress(n)`` after each record handled."""

    def __init__(
        self,
        engine: Engine,
        report: ImportReport,
        *,
        source_name: str,
        project: str | None,
        progress: Callable[[int], object] | None = None,
    ) -> None:
        self.engine = engine
        self.report = report
        self.source = f"{report.format}:{source_name}"
        self.project = project
        self.progress = progress
        self.pending: list[MemoryInput] = []
        self.seen: set[tuple[str, str]] = set()
        self.done: set[str] = set()

    async def run(self, records: Iterable[Record]) -> ImportReport:
        # The conversations and documents an earlier import ingested, by their sources: ingest
        # stores a conversation's pieces in one transaction, so one that has memories is whole.
        # Skipped as such rather than ingested again: novelty is a nearest-neighbour decision, and
        # a piece found a duplicate once need not be found one by an approximate index later.
        project = v.project_name(self.project, self.engine.config.default_project)
        self.done = await self.engine.store.sources(project, f"{self.report.format}:")
        for rec in records:
            if isinstance(rec, Skip):
                self.report.skipped[rec.reason] += rec.count
                continue
            if isinstance(rec, Fact):
                await self.fact(rec)
            elif isinstance(rec, Conversation):
                await self.conversation(rec)
            else:
                await self.document(rec)
            if self.progress is not None:
                self.progress(1)
        await self.flush()
        return self.report

    async def fact(self, rec: Fact) -> None:
        cfg = self.engine.config
        self.report.read += 1
        if len(rec.content) > cfg.remember.max_content_chars:  # a long note: split as a document
            self.report.read -= 1
            await self.document(Document(id=rec.id, text=rec.content, at=rec.occurred_at))
            return
        try:
            item = MemoryInput.parse(
                cfg,
                {
                    "content": rec.content,
                    "project": self.project,
                    "category": (rec.category or "").strip().lower()[:64] or None,
                    "tags": _clean_tags(rec.tags, cfg.remember.max_tags),
                    "occurred_at": rec.occurred_at,
                    "metadata": {**rec.metadata, "imported_from": self.report.format, "original_id": rec.id},
                    "source": self.source,
                },
            )
        except InvalidInput as e:
            self.report.skipped[f"invalid ({_first_words(str(e))})"] += 1
            return
        key = (item.project, item.content_hash)
        if key in self.seen:  # the same fact twice in the export (custom instructions in every chat)
            self.report.duplicate += 1
            return
        self.seen.add(key)
        self.report.to_import += 1
        if not self.report.dry_run:
            self.pending.append(item)
            if len(self.pending) >= BATCH:
                await self.flush()

    async def flush(self) -> None:
        if not self.pending:
            return
        batch: list[MemoryInput | dict[str, Any]] = list(self.pending)
        self.pending.clear()
        for r in await self.engine.remember_many(batch, chain=False):
            if r.status == "created":
                self.report.stored += 1
            else:
                self.report.duplicate += 1

    async def conversation(self, conv: Conversation) -> None:
        self.report.read += len(conv.messages)
        self.report.conversations += 1
        for i, part in enumerate(self._parts(conv.messages)):
            source = f"{self.report.format}:{conv.id}" + (f"#{i + 1}" if i else "")
            if self._imported(source, len(part)):
                continue
            self.report.to_import += len(part)
            if not self.report.dry_run:
                text = json.dumps([{"role": m.role, "content": m.text} for m in part], ensure_ascii=False)
                await self._ingest(text, "conversation", source, conv.started, len(part))

    async def document(self, doc: Document) -> None:
        self.report.read += 1
        source = f"{self.report.format}:{doc.id}"
        if self._imported(source, 1):
            return
        self.report.to_import += 1
        if not self.report.dry_run:
            await self._ingest(doc.text, "document", source, doc.at, 1)

    def _imported(self, source: str, n: int) -> bool:
        """Whether an earlier import ingested ``source``: its ``n`` items count as duplicates."""
        if source not in self.done:
            return False
        self.report.duplicate += n
        self.report.already_imported += 1
        return True

    async def _ingest(self, text: str, kind: str, source: str, at: Any, n: int) -> None:
        try:
            res = await self.engine.ingest(
                {"text": text, "kind": kind, "project": self.project, "source": source, "occurred_at": at}
            )
        except InvalidInput as e:
            self.report.skipped[f"refused by ingest ({_first_words(str(e))})"] += n
            return
        c = res.counts
        self.report.stored += c["stored"]
        self.report.duplicate += c["duplicate"]
        self.report.filtered += c["filtered"]

    def _parts(self, messages: list[Message]) -> list[list[Message]]:
        """The messages in parts ingest takes whole (``ingest.max_input_chars``, with room for the
        JSON around them); almost every conversation is one part."""
        limit = self.engine.config.ingest.max_input_chars // 2
        parts: list[list[Message]] = [[]]
        size = 0
        for m in messages:
            if parts[-1] and size + len(m.text) > limit:
                parts.append([])
                size = 0
            parts[-1].append(m)
            size += len(m.text)
        return parts


def _first_words(message: str, n: int = 8) -> str:
    words = message.split()
    return " ".join(words[:n]) + (" ..." if len(words) > n else "")
