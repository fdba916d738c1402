"""The recall pipeline: nine stages, top to bottom. Each is timed into the trace.

| # | stage | module | offline behaviour |
|---|-------|--------|-------------------|
| 1 | intent analysis | intent.py | skipped (needs an LLM) |
| 2 | query synthesis | synthesize.py | skipped: the question is the only query |
| 3 | HyDE | hyde.py | skipped: the question's embedding is used |
| 4 | retrieval | retrieve.py | vector (cosine) + keyword (BM25) arms |
| 5 | fusion | fuse.py | weighted score fusion (recall.fusion = "score") or RRF |
| 6 | rerank | rerank.py | skipped: fused order kept |
| 7 | relevance threshold | threshold.py | kept on cosine, or an informative shared word and some cosine; else dropped |
| 8 | scoring adjustments | adjust.py | pass-through for now |
| 9 | token-budgeted assembly | assemble.py | best memories within max_tokens and limit |
"""

from __future__ import annotations

import time
from contextlib import contextmanager

from . import adjust, assemble, fuse, hyde, intent, rerank, retrieve, synthesize, threshold
from .records import Query, RecallRequest, RecallResult, StageTrace, Trace


@contextmanager
def _stage(trace: Trace, name: str, count_in: int):
    st = StageTrace(stage=name, ms=0.0, count_in=count_in, count_out=count_in, status="ran")
    t0 = time.perf_counter()
    try:
        yield st
    finally:
        st.ms = (time.perf_counter() - t0) * 1000
        trace.stages.append(st)


async def recall(engine, req: RecallRequest, *, arms: tuple[str, ...] = retrieve.ARMS) -> RecallResult:
    cfg, llm, trace = engine.config.recall, engine.llm, Trace()
    query = Query(text=req.query)

    with _stage(trace, "intent", 1) as st:
        query, st.status = intent.analyse(query, llm)
    with _stage(trace, "synthesis", 1) as st:
        query, st.status = synthesize.synthesize(query, llm)
        st.count_out = 1 + len(query.variants)
    with _stage(trace, "hyde", st.count_out) as st:
        query, st.status = hyde.hypothesise(query, llm)
    with _stage(trace, "retrieval", 1 + len(query.variants)) as st:
        found = await retrieve.retrieve(
            engine.store,
            engine.embedder,
            query,
            req,
            k=cfg.candidates_per_arm,
            common_df=cfg.keyword_common_df,
            arms=arms,
        )
        st.count_out = len(found.scores)
        st.detail = {"arms": {name: len(hits) for name, hits in found.lists.items()}}
    with _stage(trace, "fusion", st.count_out) as st:
        weights = {"vector": cfg.vector_weight, "keyword": cfg.keyword_weight}
        candidates = fuse.fuse(found, method=cfg.fusion, rrf_k=cfg.rrf_k, weights=weights)
        st.count_out = len(candidates)
        st.detail = {"method": cfg.fusion}
    with _stage(trace, "rerank", len(candidates)) as st:
        candidates, st.status = rerank.rerank(req.query, candidates, llm)
    with _stage(trace, "threshold", len(candidates)) as st:
        candidates = threshold.apply_floor(candidates, cfg, query=req.query)
        st.count_out = len(candidates)
        st.detail = {
            "min_similarity": cfg.min_similarity,
            "semantic_min_similarity": cfg.semantic_min_similarity,
            "word_min_similarity": cfg.word_min_similarity,
            "relative_floor": cfg.relative_floor,
        }
    with _stage(trace, "adjustments", len(candidates)) as st:
        candidates, st.status = adjust.adjust(candidates, req.reference_time)
    with _stage(trace, "assembly", len(candidates)) as st:
        packed = await assemble.assemble(
            candidates,
            limit=req.limit,
            max_tokens=req.max_tokens,
            explain=req.explain,
            handles=engine.store.handles,
        )
        chosen, tokens = packed.chosen, packed.tokens_used
        st.count_out = len(chosen)
        st.detail = {"tokens_used": tokens, "max_tokens": req.max_tokens, "limit": req.limit}

    return RecallResult(
        memories=[(c.memory, c.score) for c in chosen],
        ranked=candidates,
        tokens_used=tokens,
        trace=trace,
        rendered=packed.rendered,
    )
