"""Long memories found in full: the vectors of a memory's later parts.

The embedding model reads a text's first window only (all-MiniLM-L6-v2: 254 tokens, about 1,000
characters), so the vector of a long assistant reply or a pasted document says nothing of its end.
A memory longer than the window gets, beside its own vector, one vector per part
(``Embedder.passages``: parts half a window long, each starting three quarters of a part after the
one before it). They are stored in ``memory_passages`` with the memory, in its write's transaction,
and the vector arm scores a memory by its own vector or its best passage less a margin, whichever
is closer (store/search.py). A memory within the window gets none; nor does one of an embedder that
cannot say where its window ends (OpenAI's reads 8,191 tokens, more than
``remember.max_content_chars`` holds).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.providers.embedding import embed_texts

if TYPE_CHECKING:
    from memlane.pipeline.providers.embedding.base import Embedder
    from memlane.pipeline.remember.context import WriteContext

Passages = tuple[list[float], ...]


def _may_be_long(embedder: Embedder, text: str) -> bool:
    # A token is at least one character: a text no longer than the window in characters fits. A
    # model not loaded yet may learn its window when it loads: its texts are asked (and load it).
    if embedder.window is None:
        return not embedder.loaded
    return len(text) > embedder.window


def cut(embedder: Embedder, texts: list[str]) -> list[list[str]]:
    """Each text's passages (none for one within the window)."""
    return [embedder.passages(t) if _may_be_long(embedder, t) else [] for t in texts]


async def embed_passages(
    embedder: Embedder, texts: list[str], timeout_s: float, *, enabled: bool = True
) -> list[Passages]:
    """The vectors of each text's passages, in order; () for a text that has none. Cut and embedded
    off the event loop."""
    if not enabled or not any(_may_be_long(embedder, t) for t in texts):
        return [() for _ in texts]
    try:
        parts = await asyncio.to_thread(cut, embedder, texts)
    except Exception as e:  # noqa: BLE001 - the tokenizer is the model's: its failure is the embedder's
        raise EmbeddingFailed(
            f"the embedding model could not read a text's passages ({type(e).__name__})"
        ) from e
    flat = [p for ps in parts for p in ps]
    if not flat:
        return [() for _ in texts]
    vectors = await embed_texts(embedder, flat, timeout_s)
    out: list[Passages] = []
    i = 0
    for ps in parts:
        out.append(tuple(vectors[i : i + len(ps)]))
        i += len(ps)
    return out


async def for_inputs(ctx: WriteContext, texts: list[str]) -> list[Passages]:
    """``embed_passages`` with the write's settings; a failure stores nothing (as the texts' own
    vectors' does)."""
    try:
        return await embed_passages(
            ctx.embedder,
            texts,
            ctx.config.embedding.embed_timeout_s,
            enabled=ctx.config.embedding.passages,
        )
    except EmbeddingFailed as e:
        raise EmbeddingFailed(f"{e}; nothing was stored") from e
