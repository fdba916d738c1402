"""``memlane bench locomo``: retrieval quality on LoCoMo, by the evaluation protocol in
docs/benchmarks.md#the-evaluation-protocol-bench-locomo.

One project per conversation, stored along one of three paths (``--path``):

- ``tool`` (the default, the project's figure): every turn through the code the MCP ``remember``
  tool runs (``server/mcp/tools.py remember_memory``), one call per turn in order, with only the
  tool's parameters (content, project, occurred_at, metadata); every question through the recall
  tool's arguments (``Engine.recall``), which counts an access for each memory returned, as the tool
  does. The questions are asked three times: without counting accesses, counting them (the
  headline), and once more, so the report has what counting changes;
- ``batch``: the turns in batches of 128 through ``remember_many``, each session a ``source`` with
  positions (what an importer that knows the conversation's structure can send);
- ``ingest``: each session as one text through the ``ingest`` tool's code.

Every question with evidence is recalled with "now" = the last session's date; the ranked list is
``Recalled.ranked`` (the final order before token packing), mapped to dia ids; recall@k =
|evidence ∩ first k| / |evidence|.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from memlane.bench import adjustments, unrelated
from memlane.bench.common import (
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
from memlane.bench.locomo_data import (
    EVIDENCE_RULES,
    REFERENCE_TIME_RULE,
    SHAPE_RULE,
    Conversation,
    Question,
    load_conversations,
    long_replies,
)
from memlane.bench.methods import Method, ablation_methods, recall_settings
from memlane.pipeline.recall import arms as arm_registry
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.server.mcp.tools import ingest_text, remember_memory

PATHS = ("tool", "batch", "ingest")
SHAPES = ("turns", "long-replies")
K_VALUES = (1, 5, 10, 20)
# `ranked` is taken before packing, so the limit does not cut it; it only shapes the assembly stage,
# which is timed, so it is set to what a caller wanting the top 20 would ask for.
RECALL_LIMIT = max(K_VALUES)
BATCH_SIZE = 128
DEFAULT = Method("default", ())
EVIDENCE_KEYS = (
    "split",
    "normalised",
    "duplicates",
    "dropped_malformed",
    "unknown_kept",
    "questions_skipped",
)  # no arms given: the pipeline exactly as a user calls it


@dataclass
class Ingested:
    conv: Conversation
    project: str
    dias_by_id: dict[str, list[str]]  # memory id -> dia ids stored as it (several if deduplicated)


@dataclass
class MethodRun:
    """What one method produced over every question: scores and timings."""

    scores: list[tuple[int | None, dict[int, float]]] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)  # delivered per recall, as the client reads it
    stage_ms: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    lists: list[list[str]] = field(default_factory=list)  # the default method's ranked ids per question
    # Per question (default method): evidence dia ids in stage 7's top 20, and those it dropped.
    floor: list[tuple[int, list[str]]] = field(default_factory=list)
    by_conversation: dict[str, list[tuple[int | None, dict[int, float]]]] = field(
        default_factory=lambda: defaultdict(list)
    )


def ranked_dia_ids(result, dias_by_id: dict[str, list[str]], depth: int = RECALL_LIMIT) -> list[str]:
    """The ranked memories as dia ids, repeats dropped keeping the first position (as the protocol says).
    A memory maps to its metadata's dia_id plus any identical turn the store deduplicated into it."""
    out: list[str] = []
    for cand in result.ranked:
        m = cand.memory
        for dia in (m.metadata.get("dia_id"), *dias_by_id.get(str(m.id), ())):
            if dia and dia not in out:
                out.append(dia)
        if len(out) >= depth:
            break
    return out


def threshold_losses(result, dias_by_id: dict[str, list[str]], evidence) -> tuple[int, list[str]]:
    """The evidence dia ids among the first 20 candidates stage 7 was given, and those of them it
    dropped (not in the final order at any position)."""
    kept = {str(c.memory.id) for c in result.ranked}
    wanted = set(evidence)
    before, lost = set(), set()
    for mid in map(str, result.before_threshold[:RECALL_LIMIT]):
        held = wanted & set(dias_by_id.get(mid, ()))
        before |= held
        if mid not in kept:
            lost |= held
    # A dia id also held by a memory that was kept (a merged piece and its duplicate) is not lost.
    for mid in kept:
        lost -= set(dias_by_id.get(mid, ()))
    return len(before), sorted(lost)


def threshold_block(run: MethodRun, questions: list[str]) -> dict[str, Any]:
    before = sum(n for n, _ in run.floor)
    lost = sum(len(x) for _, x in run.floor)
    losing = [(q, x) for q, (_, x) in zip(questions, run.floor, strict=True) if x]
    return {
        "evidence_in_top20_before": before,
        "evidence_lost": lost,
        "lost_share": round(lost / before, 4) if before else None,
        "questions_losing_evidence": len(losing),
        "examples": [{"question": q, "lost": x} for q, x in losing[:10]],
        "rule": "evidence dia ids among the first 20 candidates stage 7 was given that are not in the "
        "final order at any position",
    }


def recall_at(ranked: list[str], evidence: tuple[str, ...], ks=K_VALUES) -> dict[int, float]:
    wanted = set(evidence)
    return {k: len(wanted & set(ranked[:k])) / len(wanted) for k in ks}


def _mean_block(rows: list[dict[int, float]]) -> dict[str, float | None]:
    return {str(k): (round(fmean(r[k] for r in rows), 4) if rows else None) for k in K_VALUES}


def recall_block(scores: list[tuple[int | None, dict[int, float]]]) -> dict[str, Any]:
    """The JSON recall block: all questions, categories 1-4, and each category."""
    cats = sorted({c for c, _ in scores if c is not None})
    return {
        "all": _mean_block([s for _, s in scores]),
        "cat1_4": _mean_block([s for c, s in scores if c in (1, 2, 3, 4)]),
        "by_category": {str(c): _mean_block([s for cc, s in scores if cc == c]) for c in cats},
    }


async def ingest(ctx: BenchContext, convs: list[Conversation], show: bool) -> tuple[list[Ingested], dict]:
    """Remember every turn, one project per conversation; returns the id -> dia ids maps and speed."""
    engine, out, seconds, created = ctx.engine, [], 0.0, 0
    total = sum(len(c.turns) for c in convs)
    with progress(total, "remember", show, unit="turn") as bar:
        for conv in convs:
            project = ctx.project(f"locomo-{conv.name}")
            dias: dict[str, list[str]] = defaultdict(list)
            # A conversation as a client would ingest it: each session is a source, its turns in
            # order (the graph links consecutive turns).
            seen_in_session: dict[int, int] = defaultdict(int)
            positions = []
            for t in conv.turns:
                positions.append(seen_in_session[t.session])
                seen_in_session[t.session] += 1
            for start, batch in zip(
                range(0, len(conv.turns), BATCH_SIZE), chunks(conv.turns, BATCH_SIZE), strict=True
            ):
                items: list[MemoryInput | dict[str, Any]] = [
                    {
                        "content": t.content,
                        "project": project,
                        "occurred_at": t.occurred_at,
                        "metadata": {"dia_id": t.dia_id, "session": t.session},
                        "source": f"bench-locomo-session-{t.session}",
                        "position": positions[start + i],
                    }
                    for i, t in enumerate(batch)
                ]
                t0 = time.perf_counter()
                results = await engine.remember_many(items)
                seconds += time.perf_counter() - t0
                for turn, res in zip(batch, results, strict=True):
                    dias[str(res.id)].extend(turn.dia_ids)
                    created += res.status == "created"
                bar.update(len(batch))
            out.append(Ingested(conv=conv, project=project, dias_by_id=dict(dias)))
    return out, _remember_stats(total, created, seconds)


def _remember_stats(total: int, created: int, seconds: float) -> dict[str, Any]:
    return {
        "turns": total,
        "memories": created,
        "deduplicated": total - created,
        "seconds": round(seconds, 3),
        "per_second": round(total / seconds, 2) if seconds else None,
    }


async def remember_turns(
    ctx: BenchContext, convs: list[Conversation], show: bool
) -> tuple[list[Ingested], dict]:
    """The ``tool`` path: one ``remember`` tool call per turn, in order, with the tool's parameters
    only (no source, no position: what an assistant sends)."""
    engine, out, seconds, created = ctx.engine, [], 0.0, 0
    total = sum(len(c.turns) for c in convs)
    with progress(total, "remember", show, unit="turn") as bar:
        for conv in convs:
            project = ctx.project(f"locomo-{conv.name}")
            dias: dict[str, list[str]] = defaultdict(list)
            for t in conv.turns:
                t0 = time.perf_counter()
                res = await remember_memory(
                    engine,
                    None,
                    content=t.content,
                    project=project,
                    occurred_at=t.occurred_at.isoformat(),
                    metadata={"dia_id": t.dia_id, "session": t.session},
                )
                seconds += time.perf_counter() - t0
                dias[str(res.id)].extend(t.dia_ids)
                created += res.status == "created"
                bar.update(1)
            out.append(Ingested(conv=conv, project=project, dias_by_id=dict(dias)))
    return out, _remember_stats(total, created, seconds)


async def ingest_sessions(
    ctx: BenchContext, convs: list[Conversation], show: bool
) -> tuple[list[Ingested], dict]:
    """The ``ingest`` path (and the ``--ingest`` variant): each session goes through the ``ingest``
    tool's code as one conversation
    ("Speaker: text" lines, the session date as occurred_at, source locomo-<conv>-session-<n>); every
    piece maps back to its turn (the result's ``turn``), so a stored piece is its dia id and a
    duplicate counts as the memory it matched, as an exact duplicate does in the remember run."""
    engine, out, seconds = ctx.engine, [], 0.0
    counts: Counter = Counter()
    reasons: Counter = Counter()
    status_of: dict[tuple[str, str], set[str]] = {}  # (conversation, dia id) -> its pieces' statuses
    mismatched = 0
    total = sum(len(c.turns) for c in convs)
    with progress(total, "ingest", show, unit="turn") as bar:
        for conv in convs:
            project = ctx.project(f"locomo-ingest-{conv.name}")
            dias: dict[str, list[str]] = defaultdict(list)
            sessions: dict[int, list] = defaultdict(list)
            for t in conv.turns:
                sessions[t.session].append(t)
            for n, turns in sorted(sessions.items()):
                text = "\n".join(" ".join(t.content.split()) for t in turns)
                t0 = time.perf_counter()
                res = await ingest_text(
                    engine,
                    None,
                    text,
                    kind="conversation",
                    project=project,
                    source=f"locomo-{conv.name}-session-{n}",
                    occurred_at=turns[0].occurred_at.isoformat(),
                )
                seconds += time.perf_counter() - t0
                if len({p.turn for p in res.pieces}) != len(turns):
                    mismatched += 1
                for p in res.pieces:
                    counts[p.status] += 1
                    if p.turn is None or p.turn >= len(turns):
                        continue
                    for dia in turns[p.turn].dia_ids:
                        status_of.setdefault((conv.name, dia), set()).add(p.status)
                        mid = p.id if p.status == "stored" else p.duplicate_of
                        if mid is not None and dia not in dias[str(mid)]:
                            dias[str(mid)].append(dia)
                    if p.status == "filtered":
                        reasons[p.rule] += 1
                bar.update(len(turns))
            out.append(Ingested(conv=conv, project=project, dias_by_id=dict(dias)))
    evidence = {(c.name, d) for c in convs for q in c.questions for d in q.evidence}
    known = {k for k in evidence if k in status_of}
    lost = sorted(k for k in known if status_of[k] == {"filtered"})
    deduplicated = sum(1 for k in known if "stored" not in status_of[k] and "duplicate" in status_of[k])
    stats = {
        "turns": total,
        "pieces": sum(counts.values()),
        "stored": counts["stored"],
        "duplicate": counts["duplicate"],
        "filtered": counts["filtered"],
        "filtered_by": dict(reasons.most_common()),
        "sessions_split_differently": mismatched,
        "evidence_turns": len(known),
        "evidence_turns_lost": len(lost),
        "evidence_lost_share": round(len(lost) / len(known), 4) if known else None,
        "evidence_turns_deduplicated": deduplicated,
        "lost_examples": [f"{c}:{d}" for c, d in lost[:20]],
        "seconds": round(seconds, 3),
        "turns_per_second": round(total / seconds, 2) if seconds else None,
    }
    return out, stats


async def ask_one(
    ctx: BenchContext,
    ing: Ingested,
    q: Question,
    methods: list[Method],
    runs: dict,
    variants: dict | None = None,
    count_accesses: bool | None = None,
) -> None:
    """One question, every method; records scores, wall time and per-stage ms per method. With
    ``variants`` (``adjustments.variants``), each scoring-adjustment variant re-scores the default
    run's candidates, recorded as ``adjust:<name>``. ``count_accesses`` (the tool path): the default
    method goes through the recall tool's code, counting accesses when True."""
    engine = ctx.engine
    req = RecallQuery.parse(
        engine.config,
        {
            "query": q.text,
            "project": ing.project,
            "limit": RECALL_LIMIT,
            "reference_time": ing.conv.reference_time,
        },
    )
    for method in methods:
        if method is DEFAULT and count_accesses is not None:
            # As the recall tool asks: its arguments, counting accesses when the tool would.
            t0 = time.perf_counter()
            result = await engine.recall(
                {
                    "query": q.text,
                    "project": ing.project,
                    "limit": RECALL_LIMIT,
                    "reference_time": ing.conv.reference_time.isoformat(),
                    "count_accesses": count_accesses,
                }
            )
            ms = (time.perf_counter() - t0) * 1000
        else:
            with recall_settings(engine, method.recall_config):
                asked = req.model_copy(update={"ablation": method.ablation()}) if method.arms else req
                result, ms = await timed_recall(engine, asked)
        run: MethodRun = runs[method.name]
        if method is DEFAULT:
            run.lists.append([str(c.memory.id) for c in result.ranked[:RECALL_LIMIT]])
            run.floor.append(threshold_losses(result, ing.dias_by_id, q.evidence))
        score = (q.category, recall_at(ranked_dia_ids(result, ing.dias_by_id), q.evidence))
        run.scores.append(score)
        run.by_conversation[ing.conv.name].append(score)
        run.wall_ms.append(ms)
        run.tokens.append(unrelated.delivered_tokens(result))
        for st in result.trace.stages:
            run.stage_ms[st.stage].append(st.ms)
        if variants and method is DEFAULT:
            for name, res in adjustments.rescored(result, req, variants).items():
                runs.setdefault(f"adjust:{name}", MethodRun()).scores.append(
                    (q.category, recall_at(ranked_dia_ids(res, ing.dias_by_id), q.evidence))
                )


def _same_as_default(method: Method) -> bool:
    """True when the method is what a plain recall runs anyway, so its results can be shared."""
    return not method.options and not method.recall_config and tuple(method.arms) == arm_registry.names()


async def ask_all(
    ctx: BenchContext,
    ingested: list[Ingested],
    ablation: list[Method],
    show: bool,
    variants: dict | None = None,
    count_accesses: bool | None = None,
) -> dict:
    methods = [DEFAULT] + [m for m in ablation if not _same_as_default(m)]
    runs = {m.name: MethodRun() for m in methods}
    total = sum(len(i.conv.questions) for i in ingested)
    with progress(total, "recall", show, unit="q") as bar:
        for ing in ingested:
            for q in ing.conv.questions:
                await ask_one(ctx, ing, q, methods, runs, variants, count_accesses)
                bar.update(1)
    for m in ablation:  # methods identical to the default share its run
        runs.setdefault(m.name, runs[DEFAULT.name])
    return runs


def _categories(convs: list[Conversation]) -> dict[str, int]:
    counts = Counter(q.category for c in convs for q in c.questions if q.category is not None)
    return {str(k): counts[k] for k in sorted(counts)}


def build_report(ctx, source, convs, remember, runs, ablation, vers, unrelated_block=None) -> dict[str, Any]:
    main: MethodRun = runs[DEFAULT.name]
    notes: Counter[str] = sum((c.evidence_notes for c in convs), Counter())
    report: dict[str, Any] = {
        "dataset": "locomo",
        "source": str(source),
        "conversations": len(convs),
        "questions": sum(len(c.questions) for c in convs),
        "recall": recall_block(main.scores),
        "latency_ms": {**percentiles(main.wall_ms), "stages": stage_percentiles(main.stage_ms)},
        "tokens_delivered": {
            "mean": round(fmean(main.tokens), 1) if main.tokens else None,
            **percentiles(main.tokens),
            "max_tokens": ctx.engine.config.recall.default_max_tokens,
            "limit": RECALL_LIMIT,
        },
        "remember": remember,
        "questions_by_category": _categories(convs),
        "per_conversation": {
            c.name: {
                "turns": len(c.turns),
                "questions": len(c.questions),
                "last_session": c.last_session,
                "reference_time": c.reference_time.isoformat(),
                "recall": recall_block(main.by_conversation[c.name])["all"],
            }
            for c in convs
        },
        "evidence": {k: notes.get(k, 0) for k in EVIDENCE_KEYS},
        "unrelated": unrelated_block,
        "config": config_snapshot(
            ctx,
            k=list(K_VALUES),
            recall_limit=RECALL_LIMIT,
            count_accesses="tool path: as the recall tool (see 'access'); batch and ingest: False",
            remember_batch=BATCH_SIZE,
            reference_time=REFERENCE_TIME_RULE,
            evidence=EVIDENCE_RULES,
            latency="wall-clock ms of Engine.recall per question (default method only); "
            "stages from the recall trace",
        ),
        "versions": vers,
    }
    adjusted = {name[len("adjust:") :]: r for name, r in runs.items() if name.startswith("adjust:")}
    if adjusted:
        report["adjust_variants"] = {name: recall_block(r.scores) for name, r in adjusted.items()}
        report["adjust_variants_note"] = (
            "stage 8 re-applied to the default run's stage-7 candidates per variant (bench/adjustments.py); "
            "no access statistics (count_accesses false), one project per recall"
        )
    if ablation:
        report["ablation"] = {m.name: recall_block(runs[m.name].scores) for m in ablation}
        report["ablation_methods"] = {
            m.name: {**m.describe(), "shares_default_run": _same_as_default(m)} for m in ablation
        }
        report["ablation_latency_ms"] = {m.name: percentiles(runs[m.name].wall_ms) for m in ablation}
    return report


def _changed(a: MethodRun, b: MethodRun) -> int:
    """Questions whose ranked list differs between two runs of the same questions."""
    return sum(1 for x, y in zip(a.lists, b.lists, strict=True) if x != y)


async def run(
    settings,
    data: str | Path,
    *,
    path: str = "tool",
    shape: str = "turns",
    ablate: bool = False,
    ingest_variant: bool = False,
    adjust_variants: bool = False,
    embedder=None,
    show_progress=True,
) -> dict:
    """Load, store along ``path`` (module docstring), ask, score; returns the JSON-ready report.
    ``ingest_variant``: also feed each session through the ingest path and score the same questions
    on what it kept (report["ingest"]); ``adjust_variants``: also score each stage-8 variant on the
    default run's candidates."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(PATHS)}, not {path!r}")
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    convs = load_conversations(data)
    if shape == "long-replies":
        convs = [long_replies(c) for c in convs]
    async with bench_engine(settings, embedder=embedder) as ctx:
        await asyncio.to_thread(ctx.engine.runtime.warm)  # model load is not remember throughput
        store = {"tool": remember_turns, "batch": ingest, "ingest": ingest_sessions}[path]
        ingested, remember = await store(ctx, convs, show_progress)
        ablation = ablation_methods(ctx.engine) if ablate else []
        table = None
        if adjust_variants:
            rc = ctx.engine.config.recall
            table = adjustments.variants(rc.decay, rc.adjust)
        tool = path == "tool"
        # The tool path asks first without counting accesses, then as the tool does (counting), then
        # the same questions once more: what access counting changes, and whether asking changes
        # the next answers.
        runs = await ask_all(
            ctx, ingested, ablation, show_progress, table, count_accesses=False if tool else None
        )
        access_block = None
        if tool:
            untouched = runs[DEFAULT.name]
            counted = (await ask_all(ctx, ingested, [], show_progress, count_accesses=True))[DEFAULT.name]
            again = (await ask_all(ctx, ingested, [], show_progress, count_accesses=True))[DEFAULT.name]
            runs[DEFAULT.name] = counted
            access_block = {
                "counted": recall_block(counted.scores),
                "not_counted": recall_block(untouched.scores),
                "asked_again": recall_block(again.scores),
                "lists_changed_by_counting": _changed(untouched, counted),
                "lists_changed_when_asked_again": _changed(counted, again),
                "questions": len(counted.lists),
                "note": "recall as the tool runs it counts an access per memory returned; 'counted' is the "
                "headline (questions asked in order, each after the accesses of those before it), "
                "'not_counted' the same questions first, with no access counted",
            }
        unrelated_block = await unrelated.ask(ctx.engine, ingested, limit=RECALL_LIMIT)
        vers = await versions(ctx.engine)
        report = build_report(ctx, data, convs, remember, runs, ablation, vers, unrelated_block)
        report["path"] = path
        report["shape"] = shape
        report["config"]["path"] = PATH_NOTES[path]
        if shape != "turns":
            report["config"]["shape"] = SHAPE_RULE
        report["threshold"] = threshold_block(
            runs[DEFAULT.name], [q.text for i in ingested for q in i.conv.questions]
        )
        if access_block is not None:
            report["access"] = access_block
        if hasattr(ctx.engine.embedder, "describe"):  # --stored-with
            report["config"]["embedding"] = ctx.engine.embedder.describe()
        if ingest_variant and path != "ingest":
            by_ingest, stats = await ingest_sessions(ctx, convs, show_progress)
            ingest_runs = await ask_all(ctx, by_ingest, [], show_progress)
            report["ingest"] = {
                **stats,
                "recall": recall_block(ingest_runs[DEFAULT.name].scores),
                "explicit_remember_recall": report["recall"],
                **_ingest_config(ctx),
            }
        elif path == "ingest":
            report["ingest"] = {**remember, **_ingest_config(ctx)}
        return report


def _ingest_config(ctx) -> dict[str, Any]:
    f = ctx.engine.config.filter
    return {
        "filter": f.model_dump(exclude={"exclude_patterns"}),
        "chunker": ctx.engine.config.chunker.model_dump(),
        "scoring": "R@k over every question's evidence turns; a filtered evidence turn is a miss",
    }


PATH_NOTES = {
    "tool": "one remember tool call per turn (server/mcp/tools.py remember_memory), in order, with content, "
    "project, occurred_at and metadata only; recall with the recall tool's arguments (Engine.recall)",
    "batch": f"remember_many in batches of {BATCH_SIZE}, source per session with positions",
    "ingest": "each session as one text through the ingest tool's code (ingest_text), source per session",
}
