"""``ingest``: a conversation or a document in, the memories worth keeping out.

1. split: a conversation into turns (``chunking.split_turns``; a turn longer than
   ``chunker.max_tokens`` is chunked, each chunk keeping the speaker), a document into chunks
   (``chunker.strategy``). A turn's speaker stays in its content ("Caroline: ..."), as an explicit
   remember of a turn would store it, so recall's keyword arm matches names.
2. validate every piece through ``MemoryInput.parse`` (the same checks, and the same redaction, as
   ``remember``); nothing is written if one is invalid.
3. filter (``content_filter.judge``): acknowledgements, too short, low information.
4. novelty: the kept pieces are embedded in batches; one nearest-neighbour statement per batch finds
   the closest unexpired memory of the project, and earlier pieces of the same input count too. A
   piece at or above ``filter.novelty_threshold`` is a ``duplicate`` of what it matched.
5. store the rest in one transaction (all or nothing). An exact duplicate (same content and
   occurred_at) is reported as a duplicate of the stored memory, similarity 1.

Every piece gets ``source`` (the caller's, or ``ingest:<first 8 hex of the text's sha256>``, so
ingesting the same text again names the same source) and ``position``: its index among the pieces
of the input (0-based), so positions follow the text's order and leave gaps where pieces were
filtered or deduplicated.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias
from uuid import UUID

import numpy as np

from memlane.pipeline import access
from memlane.pipeline.access import Principal
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.providers.embedding import embed_texts
from memlane.pipeline.remember import chunking, content_filter, links, write
from memlane.pipeline.remember.inputs import IngestRequest, MemoryInput
from memlane.pipeline.tokens import count_tokens

if TYPE_CHECKING:
    from memlane.pipeline.config import EngineConfig
    from memlane.pipeline.remember.context import WriteContext

EMBED_BATCH = 64
PREVIEW_CHARS = 80

# ``progress(done, total)``: pieces embedded so far, of all the pieces kept.
Progress: TypeAlias = Callable[[int, int], object]


@dataclass(slots=True)
class Piece:
    position: int
    content: str
    turn: int | None = None  # conversation: the index of the turn it comes from
    status: str = "filtered"  # "stored", "duplicate" or "filtered"
    id: UUID | None = None  # stored: the new memory
    duplicate_of: UUID | None = None
    similarity: float | None = None
    reason: str | None = None
    rule: str | None = None  # filtered: the check that dropped it (content_filter.Verdict.rule, or "empty")
    match_position: int | None = (
        None  # duplicate of an earlier piece of this input (id known after the insert)
    )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"position": self.position, "status": self.status}
        if self.turn is not None:
            out["turn"] = self.turn
        if self.id is not None:
            out["id"] = str(self.id)
        if self.duplicate_of is not None:
            out["duplicate_of"] = str(self.duplicate_of)
            out["similarity"] = self.similarity
        if self.reason is not None:
            out["reason"] = self.reason
        text = " ".join(self.content.split())
        out["preview"] = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
        return out


# A piece to store: with its parsed memory, its vector and its nearest stored memories (id,
# similarity), best first.
ToStore: TypeAlias = tuple[Piece, MemoryInput, list[float], list[tuple[UUID, float]]]


@dataclass(slots=True)
class IngestResult:
    project: str
    source: str
    kind: str
    pieces: list[Piece] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        c = Counter(p.status for p in self.pieces)
        return {
            "pieces": len(self.pieces),
            "stored": c["stored"],
            "duplicate": c["duplicate"],
            "filtered": c["filtered"],
        }

    def filtered_by(self) -> dict[str | None, int]:
        """How many pieces each filter check dropped."""
        return dict(Counter(p.rule for p in self.pieces if p.status == "filtered").most_common())

    def as_dict(self) -> dict[str, Any]:
        return {
            "project": self.project,
            "source": self.source,
            "kind": self.kind,
            "counts": self.counts,
            "pieces": [p.as_dict() for p in self.pieces],
        }


def default_source(text: str) -> str:
    return "ingest:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def split(
    text: str, kind: str, config: EngineConfig, embed: Callable[[list[str]], list[list[float]]]
) -> list[tuple[str, str, int | None]]:
    """(content, body, turn) per piece, in order; body is the content without its speaker prefix."""
    ch = config.chunker

    def chunks(body: str) -> list[str]:
        if ch.strategy == "semantic":
            return chunking.chunk_semantic(
                body,
                embed,
                threshold=ch.semantic_threshold,
                max_tokens=ch.max_tokens,
                min_tokens=ch.min_tokens,
            )
        return chunking.chunk_tokens(body, ch.max_tokens, ch.overlap_tokens)

    if kind == "document":
        return [(c, c, None) for c in chunks(text)]
    out: list[tuple[str, str, int | None]] = []
    for i, turn in enumerate(chunking.split_turns(text)):
        bodies = chunks(turn.text) if count_tokens(turn.text) > ch.max_tokens else [turn.text]
        for body in bodies:
            out.append((f"{turn.speaker}: {body}" if turn.speaker else body, body, i))
    return out


def _body_of(content: str, speaker_body: str, original: str) -> str:
    """The parsed (possibly redacted) content without the speaker prefix the split added."""
    prefix = original[: len(original) - len(speaker_body)]
    return content[len(prefix) :] if prefix and content.startswith(prefix) else content


async def ingest(
    ctx: WriteContext,
    request: IngestRequest,
    *,
    progress: Progress | None = None,
    principal: Principal | None = None,
) -> IngestResult:
    cfg = ctx.config
    text, kind = request.text, request.kind
    common = {
        "project": request.project,
        "category": request.category,
        "tags": request.tags,
        "occurred_at": request.occurred_at,
    }
    # What every piece shares, as a memory (checked once, before anything else, even if every
    # piece is filtered).
    source = request.source if request.source is not None else default_source(text)
    probe = MemoryInput.parse(cfg, {"content": "probe", **common, "source": source})
    access.check(principal, probe.project)
    assert probe.source is not None  # given above, and a given source stays one
    result = IngestResult(project=probe.project, source=probe.source, kind=kind)

    raw = await asyncio.to_thread(split, text, kind, cfg, ctx.embedder.embed_batch)
    if len(raw) > cfg.ingest.max_pieces:
        raise InvalidInput(
            f"text splits into {len(raw)} pieces; ingest takes at most {cfg.ingest.max_pieces} "
            "(ingest.max_pieces): split it into several ingest calls"
        )
    kept = _parse_and_filter(cfg, result, raw, common)
    to_store = await _novelty(ctx, result.project, kept, progress)
    if to_store:
        await _store(ctx, to_store)
    by_position = {p.position: p for p in result.pieces}
    for p in result.pieces:
        if p.match_position is not None:
            target = by_position[p.match_position]
            p.duplicate_of = target.id or target.duplicate_of
    return result


def _parse_and_filter(
    cfg: EngineConfig, result: IngestResult, raw: list[tuple[str, str, int | None]], common: dict[str, Any]
) -> list[tuple[Piece, MemoryInput]]:
    """Parse (secrets redacted) and filter every piece, appended to ``result``; the kept ones, parsed."""
    kept: list[tuple[Piece, MemoryInput]] = []
    for pos, (content, body, turn) in enumerate(raw):
        piece = Piece(position=pos, content=content, turn=turn)
        result.pieces.append(piece)
        if not body.strip():
            piece.reason = piece.rule = "empty"
            continue
        try:
            item = MemoryInput.parse(
                cfg, {"content": content, **common, "source": result.source, "position": pos}
            )
        except InvalidInput as e:
            raise InvalidInput(f"piece {pos} (from {content[:40]!r}): {e}; nothing was stored") from None
        piece.content = item.content  # as stored: secrets redacted
        verdict = content_filter.judge(_body_of(item.content, body, content), cfg)
        if not verdict.keep:
            piece.reason, piece.rule = verdict.reason, verdict.rule
            continue
        kept.append((piece, item))
    return kept


async def _novelty(
    ctx: WriteContext, project: str, kept: list[tuple[Piece, MemoryInput]], progress: Progress | None
) -> list[ToStore]:
    """Embed and novelty: in batches, one nearest-neighbour statement per batch, earlier pieces too;
    a piece at or above the threshold is marked a duplicate, the others come back to be stored
    with their vectors and neighbours."""
    cfg = ctx.config
    threshold = cfg.filter.novelty_threshold
    to_store: list[ToStore] = []
    stored_vecs: list[np.ndarray] = []
    stored_pieces: list[Piece] = []
    done = 0
    for start in range(0, len(kept), EMBED_BATCH):
        batch = kept[start : start + EMBED_BATCH]
        vecs = await embed_texts(ctx.embedder, [it.content for _, it in batch], cfg.embedding.embed_timeout_s)
        # Enough neighbours for the relates_to links too: store_inputs reuses them.
        nearest = await ctx.store.nearest_many(project, vecs, max(1, cfg.graph.relates_to_k))
        for (piece, item), vec, near in zip(batch, vecs, nearest, strict=True):
            arr = np.asarray(vec, dtype=np.float32)
            best_id: UUID | None = None
            best_sim = -1.0
            best_piece: Piece | None = None
            if near:
                best_id, best_sim = near[0]
            if stored_vecs:
                sims = np.stack(stored_vecs) @ arr
                j = int(np.argmax(sims))
                if float(sims[j]) > best_sim:
                    best_id, best_sim, best_piece = None, float(sims[j]), stored_pieces[j]
            if best_sim >= threshold:
                piece.status = "duplicate"
                piece.similarity = round(best_sim, 4)
                piece.duplicate_of = best_id
                if best_piece is not None:
                    piece.match_position = best_piece.position
                continue
            to_store.append((piece, item, vec, near))
            stored_vecs.append(arr)
            stored_pieces.append(piece)
        done += len(batch)
        if progress is not None:
            progress(done, len(kept))
    return to_store


async def _store(ctx: WriteContext, to_store: list[ToStore]) -> None:
    """Topics, insert and links, as for remember (``write.store_inputs``), with the vectors and
    neighbours found already; each piece learns its id, or that it was already stored."""
    inputs = [m for _, m, _, _ in to_store]
    stored = await write.store_inputs(
        ctx,
        inputs,
        vectors=[vec for _, _, vec, _ in to_store],
        found=[near for _, _, _, near in to_store],
        links=links.link_plan(ctx.config.graph, inputs, chain=False, embedder=ctx.embedder),
    )
    for (piece, _, _, _), r in zip(to_store, stored, strict=True):
        if r.status == "created":
            piece.status, piece.id = "stored", r.id
        else:  # the same content at the same time is already stored
            piece.status, piece.duplicate_of, piece.similarity = "duplicate", r.id, 1.0
