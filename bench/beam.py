"""``memlane bench beam``: retrieval quality on long coding-assistant conversations (BEAM's
100K-token chats: a user building a project with an assistant over weeks), by the protocol of
``../shared/beam/README.md`` and docs/benchmarks.md#what-bench-beam-does.

One project per conversation. Every turn, in order, goes through the code the MCP ``remember``
tool runs (``server/mcp/tools.py remember_memory``) with the tool's parameters only: content
``"{role}: {content}"`` (split into pieces under ``remember.max_content_chars`` where longer, as a
client would), ``occurred_at`` the latest ``time_anchor`` at or before the turn, metadata
``{"chat_id": id}``. Every question with evidence is asked with the recall tool's arguments
(``Engine.recall``, limit 20, "now" = the conversation's last anchor); the ranked list is
``Recalled.ranked`` (the final order before token packing), mapped to chat ids, repeats dropped.
R@k = |evidence ∩ first k| / |evidence|, per ability and over all. Knowledge updates: "current
first" = an updated turn in the first 10, above every original one. Contradictions: "both" = a
turn of each statement in the first 10.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from statistics import fmean
from typing import Any

from memlane.bench import unrelated
from memlane.bench.common import (
    BenchContext,
    admin_connection,
    bench_engine,
    config_snapshot,
    percentiles,
    progress,
    stage_percentiles,
    versions,
)
from memlane.server.mcp.tools import remember_memory

K_VALUES = (1, 5, 10, 20)
RECALL_LIMIT = 20
TOP = 10  # knowledge updates and contradictions are judged in the first 10
ABILITIES = (
    "information_extraction",
    "multi_session_reasoning",
    "knowledge_update",
    "temporal_reasoning",
    "event_ordering",
    "contradiction_resolution",
    "instruction_following",
    "preference_following",
    "summarization",
)


@dataclass(frozen=True, slots=True)
class Turn:
    id: int
    role: str
    content: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class Question:
    ability: str
    text: str
    evidence: tuple[int, ...]  # every evidence turn id, repeats dropped
    sides: dict[str, tuple[int, ...]]  # knowledge updates and contradictions: their two sides


@dataclass(frozen=True, slots=True)
class Conversation:
    name: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    reference_time: datetime


def _anchor(text: str) -> datetime:
    return datetime.strptime(text, "%B-%d-%Y").replace(tzinfo=UTC)


def _ids(value: Any) -> list[int]:
    if isinstance(value, dict):
        return [i for v in value.values() for i in _ids(v)]
    if isinstance(value, list):
        return [i for v in value for i in _ids(v)]
    return [value] if isinstance(value, int) and not isinstance(value, bool) else []


def load_conversation(folder: Path) -> Conversation:
    """One ``N/chat.json`` + ``N/questions.json`` pair; a malformed file is a ValueError naming it."""
    try:
        chat = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
        asked = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{folder.name}: {e}") from None
    raw = [t for batch in chat for session in batch.get("turns", []) for t in session]
    first = next((t["time_anchor"] for t in raw if t.get("time_anchor")), None) or chat[0].get("time_anchor")
    if first is None:
        raise ValueError(f"{folder.name}: no time_anchor in chat.json")
    turns, now = [], _anchor(first)
    for t in raw:
        if t.get("time_anchor"):
            now = _anchor(t["time_anchor"])
        turns.append(Turn(id=int(t["id"]), role=str(t["role"]), content=str(t["content"]), occurred_at=now))
    questions = []
    for ability, items in asked.items():
        for q in items:
            src = q.get("source_chat_ids")
            evidence = tuple(dict.fromkeys(_ids(src)))
            if not evidence:
                continue  # abstention: nothing to find
            sides = {k: tuple(_ids(v)) for k, v in src.items()} if isinstance(src, dict) else {}
            questions.append(Question(ability, str(q["question"]), evidence, sides))
    return Conversation(folder.name, tuple(turns), tuple(questions), now)


def load(path: Path) -> list[Conversation]:
    """The conversations under ``path`` (folders holding chat.json), in name order."""
    folders = sorted(
        (p for p in path.iterdir() if (p / "chat.json").is_file()),
        key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name),
    )
    if not folders:
        raise ValueError(f"no conversation folders (N/chat.json) under {path.name}")
    return [load_conversation(f) for f in folders]


def recall_at(ranked: list[int], evidence: tuple[int, ...]) -> dict[int, float]:
    return {k: len(set(evidence) & set(ranked[:k])) / len(evidence) for k in K_VALUES}


def current_first(ranked: list[int], sides: dict[str, tuple[int, ...]]) -> bool:
    top = ranked[:TOP]
    new = [top.index(i) for i in sides.get("updated_info", ()) if i in top]
    old = [top.index(i) for i in sides.get("original_info", ()) if i in top]
    return bool(new) and (not old or min(new) < min(old))


def both_sides(ranked: list[int], sides: dict[str, tuple[int, ...]]) -> bool:
    top = set(ranked[:TOP])
    return bool(top & set(sides.get("first_statement", ()))) and bool(
        top & set(sides.get("second_statement", ()))
    )


@dataclass
class Stored:
    conv: Conversation
    project: str
    chat_of: dict[str, int] = field(default_factory=dict)  # memory id -> turn id


async def store(
    ctx: BenchContext, convs: list[Conversation], show: bool
) -> tuple[list[Stored], dict[str, Any]]:
    engine = ctx.engine
    limit = engine.config.remember.max_content_chars
    out, seconds, calls = [], 0.0, 0
    with progress(sum(len(c.turns) for c in convs), "remember", show, unit="turn") as bar:
        for conv in convs:
            s = Stored(conv, ctx.project(f"beam-{conv.name}"))
            for t in conv.turns:
                text = f"{t.role}: {t.content}"
                for piece in (text[i : i + limit] for i in range(0, len(text), limit)):
                    if not piece.strip():
                        continue
                    t0 = time.perf_counter()
                    res = await remember_memory(
                        engine,
                        None,
                        content=piece,
                        project=s.project,
                        occurred_at=t.occurred_at.isoformat(),
                        metadata={"chat_id": t.id},
                    )
                    seconds += time.perf_counter() - t0
                    calls += 1
                    s.chat_of[str(res.id)] = t.id
                bar.update(1)
            out.append(s)
    return out, {
        "calls": calls,
        "seconds": round(seconds, 3),
        "per_second": round(calls / seconds, 2) if seconds else None,
    }


async def ask(ctx: BenchContext, stored: list[Stored], show: bool) -> list[dict[str, Any]]:
    rows = []
    with progress(sum(len(s.conv.questions) for s in stored), "recall", show, unit="q") as bar:
        for s in stored:
            for q in s.conv.questions:
                t0 = time.perf_counter()
                result = await ctx.engine.recall(
                    {
                        "query": q.text,
                        "project": s.project,
                        "limit": RECALL_LIMIT,
                        "reference_time": s.conv.reference_time.isoformat(),
                        "count_accesses": False,
                    }
                )
                ms = (time.perf_counter() - t0) * 1000
                ranked: list[int] = []
                for c in result.ranked:
                    cid = s.chat_of.get(str(c.memory.id))
                    if cid is not None and cid not in ranked:
                        ranked.append(cid)
                row: dict[str, Any] = {
                    "conversation": s.conv.name,
                    "ability": q.ability,
                    "recall": recall_at(ranked, q.evidence),
                    "ms": ms,
                    "tokens": unrelated.delivered_tokens(result),
                    "stages": {st.stage: st.ms for st in result.trace.stages},
                    "top": ranked[:TOP],
                }
                if q.ability == "knowledge_update":
                    row["current_first"] = current_first(ranked, q.sides)
                if q.ability == "contradiction_resolution":
                    row["both_sides"] = both_sides(ranked, q.sides)
                rows.append(row)
                bar.update(1)
    return rows


# Long memories found in full: a sentence from past a long turn's first window (what the embedding
# model reads of its own vector), asked as the question; the turn in the first 1 / 10 is a hit.
PROBES_MAX = 200
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_CODE = re.compile(r"[{}();=<>`_/\\]")


def probe_sentence(embedder: Any, text: str) -> str | None:
    """The middle one of the prose sentences (8 to 40 words, no code) that start past ``text``'s
    first window, or None (the text fits the window, or its tail is code)."""
    window = getattr(embedder, "window", None)
    if window is None:
        return None
    offsets = embedder.token_offsets(text)
    if not offsets or len(offsets) <= window:
        return None
    tail = text[offsets[window][0] :]
    sentences = [
        x.strip()
        for x in _SENTENCE_END.split(tail)[1:]  # the first may be cut
        if 8 <= len(x.split()) <= 40 and not _CODE.search(x)
    ]
    return sentences[len(sentences) // 2] if sentences else None


async def probe_long(ctx: BenchContext, stored: list[Stored], show: bool) -> dict[str, Any]:
    """``PROBES_MAX`` long turns at most (evenly spread), each asked for by a sentence of its end."""
    embedder = ctx.engine.embedder
    await asyncio.to_thread(embedder.load)
    found: list[tuple[Stored, int, str]] = []
    for s in stored:
        for t in s.conv.turns:
            sentence = probe_sentence(embedder, f"{t.role}: {t.content}")
            if sentence is not None:
                found.append((s, t.id, sentence))
    if not found:
        return {"probes": 0}
    step = max(1, len(found) // PROBES_MAX)
    chosen = found[::step][:PROBES_MAX]
    ranks: list[int | None] = []
    with progress(len(chosen), "long memories", show, unit="q") as bar:
        for s, turn, sentence in chosen:
            result = await ctx.engine.recall(
                {
                    "query": sentence,
                    "project": s.project,
                    "limit": 10,
                    "reference_time": s.conv.reference_time.isoformat(),
                    "count_accesses": False,
                }
            )
            ids = [s.chat_of.get(str(c.memory.id)) for c in result.ranked]
            ranks.append(ids.index(turn) if turn in ids else None)
            bar.update(1)
    return {
        "probes": len(chosen),
        "long_turns": len(found),
        "hit@1": round(fmean(r == 0 for r in ranks), 3),
        "hit@10": round(fmean(r is not None for r in ranks), 3),
    }


def _block(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "questions": len(rows),
        **{f"R@{k}": round(fmean(r["recall"][k] for r in rows), 3) for k in K_VALUES},
    }


async def stored_size(ctx: BenchContext, projects: list[str]) -> dict[str, Any]:
    """What the run's memories take: their rows and their passages' rows (remember/passages.py),
    as PostgreSQL stores them (pg_column_size of each row; indexes not counted)."""
    async with admin_connection(ctx.engine.store) as conn:
        cur = await conn.execute(
            "SELECT count(*), coalesce(sum(pg_column_size(m.*)), 0) FROM memories m WHERE m.project = ANY(%s)",
            (projects,),
        )
        memories, memory_bytes = await cur.fetchone() or (0, 0)
        cur = await conn.execute(
            "SELECT count(*), count(DISTINCT memory_id), coalesce(sum(pg_column_size(p.*)), 0)"
            " FROM memory_passages p WHERE p.project = ANY(%s)",
            (projects,),
        )
        passages, with_passages, passage_bytes = await cur.fetchone() or (0, 0, 0)
    n = max(memories, 1)
    return {
        "memories": memories,
        "passages": passages,
        "memories_with_passages": with_passages,
        "bytes_per_memory": round(memory_bytes / n),
        "passage_bytes_per_memory": round(passage_bytes / n),
    }


async def run(settings, data: Path, *, embedder=None, show_progress: bool = True) -> dict[str, Any]:
    convs = load(data)
    async with bench_engine(settings, embedder=embedder) as ctx:
        await asyncio.to_thread(ctx.engine.runtime.warm)  # the model's load is no remember's time
        stored, remember = await store(ctx, convs, show_progress)
        storage = await stored_size(ctx, [s.project for s in stored])
        rows = await ask(ctx, stored, show_progress)
        long_memories = await probe_long(ctx, stored, show_progress)
        vers = await versions(ctx.engine)
        config = config_snapshot(
            ctx,
            path="tool: one remember_memory call per turn (pieces under remember.max_content_chars), "
            "content, project, occurred_at, metadata {chat_id}; recall with the tool's arguments",
            recall_limit=RECALL_LIMIT,
            ranked="Recalled.ranked, before token packing",
            reference_time="the conversation's last time_anchor",
        )
    by_ability = {a: _block(rs) for a in ABILITIES if (rs := [r for r in rows if r["ability"] == a])}
    ku = [r["current_first"] for r in rows if "current_first" in r]
    cr = [r["both_sides"] for r in rows if "both_sides" in r]
    stage_ms: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        for st, ms in r["stages"].items():
            stage_ms[st].append(ms)
    return {
        "benchmark": "beam",
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": {
            "source": data.name,
            "conversations": len(convs),
            "turns": sum(len(c.turns) for c in convs),
            "questions": len(rows),
        },
        "recall": _block(rows),
        "by_ability": by_ability,
        "knowledge_update_current_first": {"hits": sum(ku), "questions": len(ku)},
        "contradiction_both_sides": {"hits": sum(cr), "questions": len(cr)},
        "remember": remember,
        "storage": storage,
        "long_memories": long_memories,
        "latency_ms": percentiles(r["ms"] for r in rows),
        "stage_ms": stage_percentiles(stage_ms),
        "tokens_delivered": percentiles(r["tokens"] for r in rows),
        "questions": [{k: v for k, v in r.items() if k != "stages"} for r in rows],
        "config": config,
        "versions": vers,
    }


def markdown(r: dict[str, Any]) -> str:
    d, ver = r["data"], r["versions"]
    head = "| ability | questions | R@1 | R@5 | R@10 | R@20 |"
    lines = [
        f"## BEAM retrieval: {d['conversations']} conversations, {d['turns']} turns, {d['questions']} questions",
        "",
        f"Mode {r['config']['mode']}, embedding {r['config']['embedding_model']}, memlane "
        f"{ver.get('memlane')} ({ver.get('git')}); the tool path, recall limit {RECALL_LIMIT}.",
        "",
        head,
        "|---|---|---|---|---|---|",
    ]
    for name, b in [*r["by_ability"].items(), ("**all**", r["recall"])]:
        lines.append(
            f"| {name.replace('_', ' ')} | {b['questions']} | "
            + " | ".join(f"{b[f'R@{k}']:.3f}" for k in K_VALUES)
            + " |"
        )
    ku, cr = r["knowledge_update_current_first"], r["contradiction_both_sides"]
    lat, tok, rem = r["latency_ms"], r["tokens_delivered"], r["remember"]
    lines += [
        "",
        f"Knowledge updates, the updated turn first in the first {TOP}: {ku['hits']} of {ku['questions']}. "
        f"Contradictions, both statements in the first {TOP}: {cr['hits']} of {cr['questions']}.",
        "",
        f"Recall p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms; tokens delivered p50 {tok['p50']:.0f}; "
        f"remember {rem['per_second']} calls/s ({rem['calls']} calls).",
    ]
    if (lm := r.get("long_memories")) and lm.get("probes"):
        lines += [
            "",
            f"Long memories found by their end: {lm['probes']} sentences from past a long turn's first "
            f"window, asked as questions; the turn first {lm['hit@1']:.3f}, in the first 10 {lm['hit@10']:.3f}.",
        ]
    if st := r.get("storage"):
        lines += [
            "",
            f"Storage: {st['memories']} memories, {st['memories_with_passages']} of them with passages "
            f"({st['passages']} passages); {st['bytes_per_memory']} bytes per memory's row and "
            f"{st['passage_bytes_per_memory']} more per memory for passages (indexes not counted).",
        ]
    return "\n".join(lines) + "\n"
