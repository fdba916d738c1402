"""The recall pipeline: nine stages, top to bottom. Each is timed into the trace.

| # | stage | module | offline behaviour |
|---|-------|--------|-------------------|
| 1 | intent analysis | intent.py | skipped (needs an LLM) |
| 2 | query synthesis | synthesize.py | skipped: the question is the only query |
| 3 | HyDE | hyde.py | skipped: the question's embedding is used |
| 4 | retrieval | retrieve.py | vector (cosine) + keyword (BM25) arms |
| 5 | fusion | fuse.py | weighted score fusion (recall.fusion = "score") or RRF |
| 6 | rerank | rerank.py | skipped: fused order kept |
| 7 | relevance threshold | threshold.py | no shared word and cosine under recall.min_similarity: dropped |
| 8 | scoring adjustments | adjust.py | pass-through for now |
| 9 | token-budgeted assembly | assemble.py | best memories within max_tokens and limit |

Every stage follows one contract (``pipeline/stage.py``): it gets the ``RecallContext`` and its
input, returns its output, and ``run_stage`` records time, counts, status (``ran``, ``skipped: why``,
``degraded: why``) and prompt. Stages given a fallback are optional: if they fail, the recall goes on
with their input and the trace says ``degraded``.
"""

from __future__ import annotations

from . import adjust, assemble, fuse, hyde, intent, rerank, retrieve, synthesize, threshold
from .context import RecallContext
from .records import Query, RecallResult
from .stage import run_stage


def _texts(q: Query) -> int:
    return 1 + len(q.variants) + (1 if q.hypothetical else 0)


def _threshold(ctx: RecallContext, candidates):
    return threshold.apply_floor(candidates, ctx.config.recall.min_similarity)


def _assemble(ctx: RecallContext, candidates):
    req = ctx.request
    return assemble.assemble(candidates, limit=req.limit, max_tokens=req.max_tokens)


async def recall(ctx: RecallContext) -> RecallResult:
    req, cfg = ctx.request, ctx.config.recall
    query = Query(text=req.query)
    query = await run_stage(ctx, "intent", intent.analyse, query, count=_texts, fallback=query)
    query = await run_stage(ctx, "synthesis", synthesize.synthesize, query, count=_texts, fallback=query)
    query = await run_stage(ctx, "hyde", hyde.hypothesise, query, count=_texts, fallback=query)
    found = await run_stage(
        ctx, "retrieval", retrieve.retrieve, query, count_in=_texts(query), count=lambda f: len(f.scores)
    )
    candidates = await run_stage(ctx, "fusion", fuse.fuse, found, count_in=len(found.scores))
    candidates = await run_stage(ctx, "rerank", rerank.rerank, candidates, fallback=candidates)
    candidates = await run_stage(
        ctx, "threshold", _threshold, candidates, detail={"min_similarity": cfg.min_similarity}
    )
    candidates = await run_stage(ctx, "adjustments", adjust.adjust, candidates, fallback=candidates)
    chosen, tokens = await run_stage(
        ctx,
        "assembly",
        _assemble,
        candidates,
        count=lambda r: len(r[0]) if isinstance(r, tuple) else len(r),
        detail={"max_tokens": req.max_tokens, "limit": req.limit},
    )
    ctx.trace.stages[-1].detail["tokens_used"] = tokens
    return RecallResult(
        memories=[(c.memory, c.score) for c in chosen], ranked=candidates, tokens_used=tokens, trace=ctx.trace
    )
