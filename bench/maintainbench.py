"""``memlane bench maintain``: ``memlane maintain`` on a synthetic store of N memories.

The store is the latency benchmark's seeded corpus (``corpus.py``) stored through ``remember_many``,
with two known kinds of work planted in it: every ``--every``-th memory is stored a second time as a
near-duplicate (first letter lower-cased, trailing full stop dropped, a moment later), and every
``--every``-th other memory is stored already expired. Then ``maintain`` runs three times: a dry run,
the real run (timed per task), and a second run that must find nothing to do. The report says what
was merged and purged against what was planted (a merge of two corpus memories that are not a
planted pair is counted separately: the corpus itself may hold near-identical memories).
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from memlane.bench.common import (
    BenchContext,
    bench_engine,
    config_snapshot,
    progress,
    versions,
)
from memlane.bench.corpus import Corpus
from memlane.pipeline import maintain
from memlane.pipeline.remember.inputs import MemoryInput

BATCH_SIZE = 256


def near_duplicate(text: str) -> str:
    text = text.rstrip(".")
    return text[:1].lower() + text[1:]


async def build(ctx: BenchContext, n: int, every: int, seed: int, show: bool) -> dict[str, Any]:
    corpus = Corpus(seed)
    projects = {name: ctx.project(f"maintain-{name}") for name in corpus.projects}
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    items: list[dict[str, Any]] = []
    planted_pairs = 0
    planted_expired = 0
    for i, it in enumerate(corpus.take(n)):
        base = {"content": it.content, "project": projects[it.project], "occurred_at": it.occurred_at}
        if i % every == every // 2:
            base["expires_at"] = past
            planted_expired += 1
        items.append(base)
        if i % every == 0:
            items.append({**base, "content": near_duplicate(it.content), "duplicate_of": len(items) - 1})
            planted_pairs += 1
    ids: list[Any] = [None] * len(items)
    started = time.perf_counter()
    with progress(len(items), "remember", show, unit="mem") as bar:
        for start in range(0, len(items), BATCH_SIZE):
            batch = items[start : start + BATCH_SIZE]
            # Restored, as an import restores an export: the planted expiries are already past,
            # which a new memory may not be.
            payload: list[MemoryInput | dict[str, Any]] = [
                MemoryInput.parse(
                    ctx.engine.config, {k: v for k, v in it.items() if k != "duplicate_of"}, restoring=True
                )
                for it in batch
            ]
            for j, r in enumerate(await ctx.engine.remember_many(payload)):
                ids[start + j] = r.id
            bar.update(len(batch))
    seconds = time.perf_counter() - started
    pairs = {ids[j]: ids[it["duplicate_of"]] for j, it in enumerate(items) if "duplicate_of" in it}
    return {
        "stored": len(items),
        "seconds": round(seconds, 1),
        "planted_near_duplicates": planted_pairs,
        "planted_expired": planted_expired,
        "_pairs": pairs,
    }


async def run(
    settings, memories: int, *, every: int = 50, seed: int = 7, embedder=None, show_progress: bool = True
) -> dict[str, Any]:
    async with bench_engine(settings, embedder=embedder) as ctx:
        await asyncio.to_thread(ctx.engine.runtime.warm)
        store = await build(ctx, memories, every, seed, show_progress)
        pairs = store.pop("_pairs")
        runs: dict[str, Any] = {}
        for name, dry in (("dry_run", True), ("run", False), ("second_run", False)):
            t0 = time.perf_counter()
            reports = await maintain.maintain(ctx.engine, ["purge", "merge", "vacuum"], dry_run=dry)
            runs[name] = {
                "seconds": round(time.perf_counter() - t0, 2),
                "tasks": {r.task: {k: v for k, v in r.as_dict().items() if k != "groups"} for r in reports},
            }
            if name == "run":
                merge = next(r for r in reports if r.task == "merge").summary
        # Which merges were the planted pairs? Both members are stored in one transaction, so they
        # share created_at and the id breaks the tie: either may be the survivor.
        merged = {}
        async for batch in ctx.engine.store.iter_memories():
            for m in batch:
                for entry in m.metadata.get("merged_from", []):
                    merged[entry["id"]] = str(m.id)
        planted_found = sum(
            1
            for dup, orig in pairs.items()
            if merged.get(str(dup)) == str(orig) or merged.get(str(orig)) == str(dup)
        )
        remaining = (await ctx.engine.store.stats())["memories"]
        cfg = config_snapshot(ctx, memories=memories, every=every, seed=seed, remember_batch=BATCH_SIZE)
        vers = await versions(ctx.engine)
    return {
        "benchmark": "maintain",
        "store": store,
        "runs": runs,
        "merge": {
            "merged": merge["merged"],
            "planted_pairs_merged": planted_found,
            "other_merges": merge["merged"] - planted_found,
            "threshold": merge["threshold"],
        },
        "memories_after": remaining,
        "config": cfg,
        "versions": vers,
    }


def markdown(r: dict[str, Any]) -> str:
    s, run, m = r["store"], r["runs"]["run"], r["merge"]
    lines = [
        f"## memlane maintain on {s['stored']} memories",
        "",
        f"Store: {s['stored']} memories through remember_many in {s['seconds']} s, with "
        f"{s['planted_near_duplicates']} planted near-duplicate pairs and {s['planted_expired']} expired.",
        "",
        "| run | seconds | purge | merge | vacuum ms |",
        "|---|---|---|---|---|",
    ]
    for name, block in r["runs"].items():
        t = block["tasks"]
        purge = t["purge"].get("purged", t["purge"].get("would_purge"))
        merge = t["merge"].get("merged", t["merge"].get("would_merge"))
        lines.append(f"| {name} | {block['seconds']} | {purge} | {merge} | {t['vacuum']['ms']} |")
    lines += [
        "",
        f"Merge (cosine >= {m['threshold']}): {m['merged']} merged, {m['planted_pairs_merged']} of "
        f"{s['planted_near_duplicates']} planted pairs, {m['other_merges']} other near-identical corpus "
        f"memories; per task in the real run: purge {run['tasks']['purge']['ms']} ms, merge "
        f"{run['tasks']['merge']['ms']} ms. {r['memories_after']} memories remain.",
        "",
    ]
    return "\n".join(lines)
