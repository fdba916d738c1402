"""``memlane bench latency``: write throughput and recall latency, each next to its floor.

A figure alone says little on an unknown machine, so each is measured against what the same
machine does in the same run with the same model:

- remember throughput (memories/s through ``remember_many``, the bulk path) vs raw batch embedding
  of the same texts in the same batches: the ratio is what validation and storage cost;
- recall latency (p50/p95, per stage) vs the floor, a query embedding plus one bare pgvector top-k
  query: the ratio is what the pipeline costs beyond the unavoidable;
- how recall p50 grows with the store (1k -> 10k -> 100k memories, one growing store).

The targets are reported as pass/fail, never asserted: this is a benchmark, not a timed test.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from typing import Any

from memlane.server.bench.common import (
    BenchContext,
    bench_engine,
    chunks,
    config_snapshot,
    percentiles,
    progress,
    stage_percentiles,
    timed_recall,
    versions,
)
from memlane.server.bench.corpus import Corpus, Query

BATCH_SIZE = 256
EMBED_SAMPLE = 2048  # texts per size step also embedded bare, interleaved with the stored batches
WARMUP_QUERIES = 5
TARGETS = {
    "recall_vs_floor": 2.0,  # recall p50 <= 2x floor p50, at every size
    "remember_vs_embedding": 0.7,  # remember throughput >= 0.7x raw embedding, at every size
    "growth_100k_vs_10k": 1.5,  # recall p50 at 100k <= 1.5x p50 at 10k
}


async def grow(ctx: BenchContext, corpus: Corpus, projects: dict[str, str], n: int, show: bool) -> dict:
    """Add ``n`` memories in batches; time the stored batches and, interleaved, bare embedding of
    some of the same batches, so background load hits both sides of the ratio alike."""
    engine, stored_s, raw_s, raw_n, created = ctx.engine, 0.0, 0.0, 0, 0
    items = corpus.take(n)
    with progress(n, "remember", show, unit="mem") as bar:
        for batch in chunks(items, BATCH_SIZE):
            texts = [it.content for it in batch]
            if raw_n < EMBED_SAMPLE:
                t0 = time.perf_counter()
                await asyncio.to_thread(engine.embedder.embed_passages, texts)
                raw_s += time.perf_counter() - t0
                raw_n += len(texts)
            payload = [
                {
                    "content": it.content,
                    "project": projects[it.project],
                    "occurred_at": it.occurred_at,
                    "source": "bench-latency",
                }
                for it in batch
            ]
            t0 = time.perf_counter()
            results = await engine.remember_many(payload)
            stored_s += time.perf_counter() - t0
            created += sum(r.status == "created" for r in results)
            bar.update(len(batch))
    remember = {
        "added": n,
        "created": created,
        "seconds": round(stored_s, 3),
        "per_second": round(n / stored_s, 2),
    }
    embedding = {"texts": raw_n, "seconds": round(raw_s, 3), "per_second": round(raw_n / raw_s, 2)}
    return {"remember": remember, "embedding": embedding}


async def floor_query(ctx: BenchContext, project: str, text: str, k: int) -> tuple[float, float]:
    """The least any vector recall must do: embed the question (off the event loop, as recall
    does) and run one bare pgvector top-k query on the project. Returns (embed ms, query ms)."""
    engine = ctx.engine
    t0 = time.perf_counter()
    [vec] = await asyncio.to_thread(engine.embedder.embed_queries, [text])
    t1 = time.perf_counter()
    await engine.store.nearest_ids(project, vec, k)
    t2 = time.perf_counter()
    return (t1 - t0) * 1000, (t2 - t1) * 1000


async def measure_recall(
    ctx: BenchContext, queries: list[Query], projects: dict[str, str], show: bool
) -> dict:
    """Recall and floor for each question, taking turns at going first: whichever runs second
    finds the question's part of the vector index in the CPU caches (the same top-k query takes
    about half as long right after), so neither side always gets the warm run."""
    engine, k = ctx.engine, ctx.engine.config.recall.candidates_per_arm
    wall, stage_ms, f_embed, f_query = [], defaultdict(list), [], []
    for q in queries[:WARMUP_QUERIES]:
        await timed_recall(engine, engine.recall_request(q.text, project=projects[q.project]))
        await floor_query(ctx, projects[q.project], q.text, k)
    with progress(len(queries), "recall", show, unit="q") as bar:
        for i, q in enumerate(queries):
            if i % 2:
                floor = await floor_query(ctx, projects[q.project], q.text, k)
            result, ms = await timed_recall(
                engine, engine.recall_request(q.text, project=projects[q.project])
            )
            if not i % 2:
                floor = await floor_query(ctx, projects[q.project], q.text, k)
            wall.append(ms)
            for st in result.trace.stages:
                stage_ms[st.stage].append(st.ms)
            f_embed.append(floor[0])
            f_query.append(floor[1])
            bar.update(1)
    floor = [e + q for e, q in zip(f_embed, f_query, strict=True)]
    return {
        "recall": {**percentiles(wall), "stages": stage_percentiles(stage_ms)},
        "floor": {**percentiles(floor), "embed": percentiles(f_embed), "query": percentiles(f_query), "k": k},
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def evaluate_targets(sizes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pass/fail per target; a target whose sizes were not measured is 'not measured'."""
    out = []
    worst_floor = max((s["recall_vs_floor"] for s in sizes), default=None)
    out.append(
        _target(
            "recall p50 / floor p50 (worst size)",
            worst_floor,
            f"<= {TARGETS['recall_vs_floor']}",
            worst_floor is not None and worst_floor <= TARGETS["recall_vs_floor"],
        )
    )
    worst_write = min((s["remember_vs_embedding"] for s in sizes), default=None)
    out.append(
        _target(
            "remember/s / raw embedding/s (worst size)",
            worst_write,
            f">= {TARGETS['remember_vs_embedding']}",
            worst_write is not None and worst_write >= TARGETS["remember_vs_embedding"],
        )
    )
    by_n = {s["memories"]: s for s in sizes}
    growth = None
    if 10_000 in by_n and 100_000 in by_n:
        growth = _ratio(by_n[100_000]["recall"]["p50"], by_n[10_000]["recall"]["p50"])
    out.append(
        _target(
            "recall p50 at 100k / p50 at 10k",
            growth,
            f"<= {TARGETS['growth_100k_vs_10k']}",
            growth is not None and growth <= TARGETS["growth_100k_vs_10k"],
        )
    )
    return out


def _target(name: str, value: float | None, limit: str, ok: bool) -> dict[str, Any]:
    result = "not measured" if value is None else ("pass" if ok else "FAIL")
    return {
        "name": name,
        "value": value,
        "limit": limit,
        "pass": None if value is None else ok,
        "result": result,
    }


def growth_table(sizes: list[dict[str, Any]]) -> dict[str, Any]:
    base = sizes[0]["recall"]["p50"] if sizes else None
    return {
        str(s["memories"]): {
            "recall_p50": s["recall"]["p50"],
            "floor_p50": s["floor"]["p50"],
            "vs_smallest": _ratio(s["recall"]["p50"], base),
        }
        for s in sizes
    }


async def run(
    settings,
    sizes: list[int],
    *,
    queries: int = 100,
    seed: int = 7,
    embedder=None,
    show_progress: bool = True,
) -> dict[str, Any]:
    corpus = Corpus(seed)
    questions = Corpus(seed).questions(queries)  # the same questions at every size
    out_sizes: list[dict[str, Any]] = []
    async with bench_engine(settings, embedder=embedder) as ctx:
        await asyncio.to_thread(ctx.engine.warm)
        projects = {name: ctx.project(f"latency-{name}") for name in corpus.projects}
        have = 0
        for target in sorted(sizes):
            step = await grow(ctx, corpus, projects, target - have, show_progress)
            have = target
            meas = await measure_recall(ctx, questions, projects, show_progress)
            out_sizes.append(
                {
                    "memories": target,
                    **step,
                    "remember_vs_embedding": _ratio(
                        step["remember"]["per_second"], step["embedding"]["per_second"]
                    ),
                    **meas,
                    "recall_vs_floor": _ratio(meas["recall"]["p50"], meas["floor"]["p50"]),
                }
            )
        cfg = config_snapshot(
            ctx,
            sizes=sorted(sizes),
            queries=queries,
            warmup_queries=WARMUP_QUERIES,
            remember_batch=BATCH_SIZE,
            embed_sample_per_size=EMBED_SAMPLE,
            touch=False,
            recall="default limit and budget, reference_time = now",
            floor="query embedding + SELECT id ... WHERE project ORDER BY embedding <=> q LIMIT k",
        )
        vers = await versions(ctx.engine)
    return {
        "benchmark": "latency",
        "corpus": {
            "seed": seed,
            "projects": len(corpus.projects),
            "generator": "memlane.server.bench.corpus",
        },
        "sizes": out_sizes,
        "growth": growth_table(out_sizes),
        "targets": evaluate_targets(out_sizes),
        "config": cfg,
        "versions": vers,
    }
