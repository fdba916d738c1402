"""``memlane bench llm``: what the LLM stages add to a recall, against a local stand-in API that
answers after a fixed delay (``llmstub.py``, OpenAI-compatible, on loopback).

The same questions are recalled on the same store twice, on the full path: offline (no provider),
then through the real ``openai`` SDK against the stand-in, with the stage cache off so every recall
pays its calls. Stages 1-3 run concurrently and rerank follows retrieval, so the LLM path should
cost about two round trips: the target is full-path p50 <= offline p50 + 2.5 x the delay.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from statistics import fmean
from typing import Any

from memlane.bench.common import (
    bench_engine,
    config_snapshot,
    percentiles,
    progress,
    stage_percentiles,
    timed_recall,
    versions,
)
from memlane.bench.corpus import Corpus
from memlane.bench.latency import grow
from memlane.pipeline.config import LLMConfig
from memlane.pipeline.llm.service import LLMService
from memlane.pipeline.providers.llm.stub import StubLLM

WARMUP = 3
BUDGET_ROUND_TRIPS = 2.5


async def _measure(ctx, questions, projects, show: bool, label: str) -> dict[str, Any]:
    engine = ctx.engine
    wall, stage_ms, calls, tokens = [], defaultdict(list), [], []
    statuses: Counter[str] = Counter()

    def request(q):
        return {"query": q.text, "project": projects[q.project], "mode": "full"}

    for q in questions[:WARMUP]:
        await timed_recall(engine, request(q))
    with progress(len(questions), label, show, unit="q") as bar:
        for q in questions:
            result, ms = await timed_recall(engine, request(q))
            wall.append(ms)
            for st in result.trace.stages:
                stage_ms[st.stage].append(st.ms)
                if st.status != "ran":
                    statuses[f"{st.stage}: {st.status.split(':')[0]}"] += 1
            calls.append(result.trace.llm.get("calls", 0))
            tokens.append(result.trace.llm.get("input_tokens", 0) + result.trace.llm.get("output_tokens", 0))
            bar.update(1)
    return {
        "recall": percentiles(wall),
        "stages": stage_percentiles(stage_ms),
        "not_ran": dict(statuses),
        "llm_calls_per_recall": round(fmean(calls), 2),
        "llm_tokens_per_recall": round(fmean(tokens), 1),
    }


async def run(
    settings,
    *,
    delay_ms: float = 200.0,
    memories: int = 1000,
    queries: int = 40,
    seed: int = 7,
    embedder=None,
    show_progress: bool = True,
) -> dict[str, Any]:
    corpus = Corpus(seed)
    questions = Corpus(seed).questions(queries)
    with StubLLM(delay_ms=delay_ms) as stub:
        async with bench_engine(settings, embedder=embedder) as ctx:
            await asyncio.to_thread(ctx.engine.runtime.warm)
            projects = {name: ctx.project(f"llm-{name}") for name in corpus.projects}
            await grow(ctx, corpus, projects, memories, show_progress)
            ctx.engine.llm = None
            offline = await _measure(ctx, questions, projects, show_progress, "offline")
            llm_cfg = LLMConfig(
                provider="openai-compatible",
                base_url=stub.base_url,
                model="stub",
                cache_size=0,  # every recall pays its calls
                max_retries=0,
            )
            ctx.engine.llm = LLMService(llm_cfg)
            full = await _measure(ctx, questions, projects, show_progress, "with LLM")
            cfg = config_snapshot(ctx, delay_ms=delay_ms, memories=memories, queries=queries, mode="full")
            vers = await versions(ctx.engine)
    off, on = offline["recall"]["p50"], full["recall"]["p50"]
    budget = off + BUDGET_ROUND_TRIPS * delay_ms
    return {
        "benchmark": "llm",
        "delay_ms": delay_ms,
        "offline": offline,
        "llm": full,
        "overhead_p50_ms": round(on - off, 3),
        "overhead_in_round_trips": round((on - off) / delay_ms, 3) if delay_ms else None,
        "target": {
            "name": f"full-path p50 <= offline p50 + {BUDGET_ROUND_TRIPS} x delay",
            "limit_ms": round(budget, 3),
            "value_ms": round(on, 3),
            "met": on <= budget,
        },
        "config": cfg,
        "versions": vers,
    }


def markdown(r: dict[str, Any]) -> str:
    off, on, t = r["offline"], r["llm"], r["target"]
    lines = [
        f"## LLM stages against a stand-in API answering after {r['delay_ms']:.0f} ms",
        "",
        "| path | recall p50 ms | p95 ms | LLM calls / recall | LLM tokens / recall |",
        "|---|---|---|---|---|",
        f"| offline (full path, no provider) | {off['recall']['p50']:.1f} | {off['recall']['p95']:.1f} | "
        f"{off['llm_calls_per_recall']} | {off['llm_tokens_per_recall']} |",
        f"| with LLM (openai SDK, cache off) | {on['recall']['p50']:.1f} | {on['recall']['p95']:.1f} | "
        f"{on['llm_calls_per_recall']} | {on['llm_tokens_per_recall']} |",
        "",
        f"Overhead p50: {r['overhead_p50_ms']:.1f} ms = {r['overhead_in_round_trips']} x the delay. "
        f"Target {t['name']}: {t['value_ms']:.1f} <= {t['limit_ms']:.1f} ms: {'met' if t['met'] else 'NOT met'}.",
        "",
        "| stage | offline p50 ms | with LLM p50 ms |",
        "|---|---|---|",
    ]
    for stage, v in on["stages"].items():
        lines.append(f"| {stage} | {off['stages'].get(stage, {}).get('p50', 0):.1f} | {v['p50']:.1f} |")
    if on["not_ran"]:
        lines += [
            "",
            "Stages that did not run with the LLM: "
            + ", ".join(f"{k} x{n}" for k, n in on["not_ran"].items()),
        ]
    return "\n".join(lines) + "\n"
