"""``memlane bench updates``: how recall treats facts that change (the protocol:
docs/benchmarks.md#what-bench-updates-does).

The data, ``bench/data/updates.json``
-------------------------------------
Written by hand for this benchmark; nothing in it comes from LoCoMo, BEAM or any other set. Each
chain is one attribute of one subject told two or three times as it changed ("Maya lives in
Lisbon", then "Maya moved to Porto", then "Maya's new place is in Berlin"), with:

- ``statements`` in the order they are stored; a statement has ``occurred_at`` in a dated chain
  (every statement of the chain has one) and none in an undated one (the order they are stored in
  is then the only clue). ``superseded_by`` names the statement that replaces it: the statements
  that should end up superseded, and no others. ``lookalike`` marks a fact of the same attribute
  about another subject ("Tom lives in Lisbon") or another attribute of the same subject (the
  notifications service Aisha owns, next to the payments service she handed over), kept in the
  chain's project because the interference is the point; none may be superseded.
  ``out_of_order`` marks a statement stored after a newer one but dated before it (an old note
  imported late): it must never supersede the newer one;
- ``tags``: ``additive`` (news that adds to the old fact, "we adopted a second dog": both stay
  current, nothing is superseded, the newest should come first), ``contradiction`` (a same-day
  correction, or "never" against "did"), ``out-of-order``, ``no-cue`` (an update that says nothing
  of a change: "My editor of choice is Helix" after "My favourite editor is Vim");
- ``questions``: ``current`` (expects the newest statement first), ``history`` (an older value: every
  expected statement within the first ``HISTORY_K``; for an additive chain the earlier item, still
  true), ``lookalike`` (the look-alike's own question: it first).

Domains: employers, roles, homes, hosting and cloud providers, libraries and frameworks, software
versions, schedules, prices and plans, owners of services, diets and allergies, pets, phone
numbers, managers, favourite tools, schools. Voices: first person ("I work at ..."), third person
("Maya lives in ..."), team ("We deploy to ..."). Chains of one ``group`` share a project (Acme's
hosting, database, frontend and CI chains, the first-person ``me`` chains), so they interfere as a
real project's memories do; every other chain has a project of its own. ``problems`` checks the
file's consistency (dates ascending but for the out-of-order statements, expectations that follow
from ``superseded_by``, ...) before anything is stored.

The run
-------
Everything goes through an MCP client in this process (``build_server`` on the bench's engine):
one ``remember`` call per statement, in order, with ``content``, ``project`` and ``occurred_at``
only; then every question through ``recall`` (the chain's project, limit ``RECALL_LIMIT``, no
reference time: "now"). A recalled memory's handle maps back to the statement stored as it.

A memory counts as marked superseded when a ``remember`` result lists it under ``supersedes``
(``[{id, content, date}]``) or a recall result shows it with ``superseded_by``. Before memlane
detected supersession neither key existed, and a missing key is read as none.

``--locomo-supersessions`` also stores the LoCoMo development conversations' turns the way ``bench
locomo``'s tool path does and counts the supersessions ``remember`` reports there, with a sample of
``{new, old}`` pairs for a human to judge (no labels exist for them).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from importlib.resources import files
from pathlib import Path
from statistics import fmean
from typing import Any

from memlane.bench.common import BenchContext, bench_engine, config_snapshot, percentiles, progress, versions

QUESTION_KINDS = ("current", "history", "lookalike")
TAGS = ("additive", "contradiction", "out-of-order", "no-cue")
VOICES = ("first-person", "third-person", "team")
# The per-kind breakdown, in this order: how a chain is told, then what it tests.
KINDS = ("dated", "undated", "2-step", "3-step", *TAGS, *VOICES)
RECALL_LIMIT = 10
HISTORY_K = 3
LOCOMO_SAMPLE = 30
DATA_NAME = "data/updates.json"

SCORING = {
    "current_hit_at_1": "current questions whose first memory is the newest statement",
    "stale_above_rate": "current questions of chains with replaced statements where one of them ranks "
    "above the newest statement (or the newest is missing and one of them is there)",
    "history_hit_at_3": f"history questions whose expected statements are all within the first {HISTORY_K}",
    "lookalike_hit_at_1": "look-alike questions whose first memory is the look-alike itself",
    "false_supersessions": "memories marked superseded that the data says must stay current",
    "missed_supersessions": "statements the data says are replaced that nothing marked superseded",
}


# -- the data ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statement:
    id: str
    content: str
    occurred_at: str | None = None
    superseded_by: str | None = None
    lookalike: bool = False
    out_of_order: bool = False


@dataclass(frozen=True)
class Question:
    id: str  # "<chain>#<n>", n from 1 in the chain's order
    chain: str
    kind: str
    text: str
    expect: tuple[str, ...]


@dataclass(frozen=True)
class Chain:
    id: str
    group: str
    voice: str
    domain: str
    tags: tuple[str, ...]
    statements: tuple[Statement, ...]
    questions: tuple[Question, ...]

    @property
    def members(self) -> tuple[Statement, ...]:
        """The chain's own statements (the look-alikes left out), in the order they are stored."""
        return tuple(s for s in self.statements if not s.lookalike)

    @property
    def dated(self) -> bool:
        return all(s.occurred_at for s in self.members)

    @property
    def replaced(self) -> frozenset[str]:
        """The statements the data says end up superseded."""
        return frozenset(s.id for s in self.statements if s.superseded_by)

    @property
    def newest(self) -> Statement:
        """The current value: the member nothing replaces (for an additive chain the latest news,
        by date, else the last stored)."""
        members = self.members
        if "additive" in self.tags:
            if self.dated:
                return max(reversed(members), key=lambda s: s.occurred_at or "")
            return members[-1]
        return next(s for s in members if not s.superseded_by)

    @property
    def kinds(self) -> tuple[str, ...]:
        return ("dated" if self.dated else "undated", f"{len(self.members)}-step", *self.tags, self.voice)


def load_chains(path: str | Path | None = None) -> list[Chain]:
    """The chains of ``path`` (default: the bundled ``bench/data/updates.json``); a file that
    ``problems`` finds fault with is refused, naming the faults."""
    if path is None:
        text = files("memlane.bench").joinpath(DATA_NAME).read_text(encoding="utf-8")
        where = DATA_NAME
    else:
        text = Path(path).read_text(encoding="utf-8")
        where = str(path)
    try:
        chains = parse(json.loads(text))
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{where}: not an update-chain file ({type(e).__name__}: {e})") from None
    found = problems(chains)
    if found:
        raise ValueError(f"{where}: " + "; ".join(found[:10]) + (" ..." if len(found) > 10 else ""))
    return chains


def parse(data: dict[str, Any]) -> list[Chain]:
    """``{"chains": [...]}`` as Chain values (shape only; ``problems`` judges the content)."""
    chains = []
    for c in data["chains"]:
        statements = tuple(
            Statement(
                id=s["id"],
                content=s["content"],
                occurred_at=s.get("occurred_at"),
                superseded_by=s.get("superseded_by"),
                lookalike=bool(s.get("lookalike", False)),
                out_of_order=bool(s.get("out_of_order", False)),
            )
            for s in c["statements"]
        )
        questions = tuple(
            Question(
                id=f"{c['id']}#{n}", chain=c["id"], kind=q["kind"], text=q["text"], expect=tuple(q["expect"])
            )
            for n, q in enumerate(c["questions"], 1)
        )
        chains.append(
            Chain(
                id=c["id"],
                group=c.get("group") or c["id"],
                voice=c["voice"],
                domain=c["domain"],
                tags=tuple(c.get("tags", ())),
                statements=statements,
                questions=questions,
            )
        )
    return chains


def _date(value: str) -> date | None:
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def problems(chains: list[Chain]) -> list[str]:
    """Every inconsistency of the data, as sentences naming the chain; empty when there is none."""
    out: list[str] = []
    seen_chains: set[str] = set()
    seen_statements: set[str] = set()
    contents: dict[str, set[str]] = defaultdict(set)
    for c in chains:
        found: list[str] = []
        if c.id in seen_chains:
            found.append("chain id used twice")
        seen_chains.add(c.id)
        if c.voice not in VOICES:
            found.append(f"voice {c.voice!r} is not one of {', '.join(VOICES)}")
        found += [f"tag {t!r} is not one of {', '.join(TAGS)}" for t in c.tags if t not in TAGS]
        ids = {s.id for s in c.statements}
        for s in c.statements:
            if s.id in seen_statements:
                found.append(f"statement id {s.id} used twice")
            seen_statements.add(s.id)
            if s.content in contents[c.group]:
                found.append(f"{s.id} repeats a statement of its project (remember would return the first)")
            contents[c.group].add(s.content)
        dated = [s for s in c.statements if s.occurred_at]
        if len(c.members) not in (2, 3):
            found.append(f"{len(c.members)} statements in the chain; chains have 2 or 3")
        elif dated and len(dated) != len(c.statements):
            found.append("some statements have occurred_at and some not: a chain is dated or undated")
        elif any(s.occurred_at and _date(s.occurred_at) is None for s in c.statements):
            found.append("an occurred_at is not an ISO date (YYYY-MM-DD)")
        else:
            found += _order_problems(c)
            succession = _succession_problems(c)
            # The questions' checks follow from the succession, which must hold first.
            found += succession or _question_problems(c, ids)
        out += [f"{c.id}: {p}" for p in found]
    return out


def _order_problems(c: Chain) -> list[str]:
    """Dated chains: stored by date, but for the statements marked out_of_order, each dated before
    a statement stored ahead of it."""
    out = []
    latest: date | None = None
    for s in c.statements:
        if s.out_of_order and not c.dated:
            out.append(f"{s.id} is out_of_order in an undated chain (there, the order is the dates)")
            continue
        if s.occurred_at is None:
            continue
        when = date.fromisoformat(s.occurred_at)
        if s.out_of_order:
            if latest is None or when >= latest:
                out.append(f"{s.id} is marked out_of_order but no statement stored before it is newer")
        elif latest is not None and when < latest:
            out.append(f"{s.id} is dated before a statement stored ahead of it: mark it out_of_order")
        else:
            latest = when
    has_ooo = any(s.out_of_order for s in c.statements)
    if has_ooo != ("out-of-order" in c.tags):
        out.append("the out-of-order tag and the statements' out_of_order flags disagree")
    return out


def _succession_problems(c: Chain) -> list[str]:
    """``superseded_by`` names a newer member of the same chain; additive chains replace nothing,
    the others end with exactly one current member."""
    out = []
    position = {s.id: i for i, s in enumerate(c.statements)}
    by_id = {s.id: s for s in c.statements}
    for s in c.statements:
        if not s.superseded_by:
            continue
        nxt = by_id.get(s.superseded_by)
        if s.lookalike:
            out.append(f"look-alike {s.id} has superseded_by: look-alikes are never superseded")
        elif nxt is None or nxt.lookalike or nxt.id == s.id:
            out.append(f"{s.id} is superseded_by {s.superseded_by}, which is no other statement of the chain")
        elif c.dated:
            a, b = date.fromisoformat(s.occurred_at or ""), date.fromisoformat(nxt.occurred_at or "")
            if b < a or (b == a and position[nxt.id] < position[s.id]):
                out.append(f"{s.id} is superseded_by {nxt.id}, which is older")
        elif position[nxt.id] < position[s.id]:
            out.append(f"{s.id} is superseded_by {nxt.id}, which is stored before it")
    current = [s for s in c.members if not s.superseded_by]
    if "additive" in c.tags:
        if c.replaced:
            out.append("an additive chain replaces nothing, yet has superseded_by")
    elif len(current) != 1:
        out.append(f"{len(current)} statements are left current; an update chain ends with one")
    return out


def _question_problems(c: Chain, ids: set[str]) -> list[str]:
    out = []
    kinds = Counter(q.kind for q in c.questions)
    if not kinds["current"]:
        out.append("no current question")
    newest = c.newest.id
    lookalikes = {s.id for s in c.statements if s.lookalike}
    for q in c.questions:
        if q.kind not in QUESTION_KINDS:
            out.append(f"{q.id}: kind {q.kind!r} is not one of {', '.join(QUESTION_KINDS)}")
            continue
        if not q.expect:
            out.append(f"{q.id}: expects nothing")
        for e in q.expect:
            if e not in ids:
                out.append(f"{q.id}: expects {e}, which is no statement of the chain")
        expect = set(q.expect)
        if q.kind == "current" and expect != {newest}:
            out.append(f"{q.id}: a current question expects the newest statement, {newest}")
        elif q.kind == "history" and (newest in expect or expect & lookalikes):
            out.append(f"{q.id}: a history question expects older statements of the chain")
        elif q.kind == "lookalike" and not expect <= lookalikes:
            out.append(f"{q.id}: a look-alike question expects look-alike statements")
        if q.kind == "history" and len(expect) > HISTORY_K:
            out.append(f"{q.id}: expects more statements than the first {HISTORY_K} can hold")
    asked = {e for q in c.questions if q.kind == "lookalike" for e in q.expect}
    for s in sorted(lookalikes - asked):
        out.append(f"look-alike {s} has no question of its own")
    return out


# -- scoring -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    question: Question
    ranked: tuple[str, ...]  # statement ids in recall's order ("?" for a memory of no statement)
    hit: bool
    stale_above: bool | None  # current questions of chains that replace something; else None
    rank: int | None  # the best expected statement's rank, from 1; None when absent


def score(chain: Chain, q: Question, ranked: Iterable[str]) -> Scored:
    """One question judged on the statement ids recall returned, best first."""
    ranked = tuple(ranked)
    first: dict[str, int] = {}
    for i, sid in enumerate(ranked):
        first.setdefault(sid, i)
    found = [first[e] for e in q.expect if e in first]
    best = min(found) if found else None
    if q.kind == "history":
        hit = all(e in first and first[e] < HISTORY_K for e in q.expect)
    else:
        hit = best == 0
    stale = None
    if q.kind == "current" and chain.replaced:
        older = [first[s] for s in chain.replaced if s in first]
        stale = bool(older) and (best is None or min(older) < best)
    return Scored(q, ranked, hit, stale, None if best is None else best + 1)


def _rate(values: list[bool]) -> float | None:
    return round(fmean(values), 4) if values else None


def metrics(scored: list[Scored]) -> dict[str, Any]:
    """The headline figures over ``scored``, with how many questions each is over."""
    by_kind: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        by_kind[s.question.kind].append(s)
    stale = [s.stale_above for s in by_kind["current"] if s.stale_above is not None]
    return {
        "current_hit_at_1": _rate([s.hit for s in by_kind["current"]]),
        "stale_above_rate": _rate(stale),
        "history_hit_at_3": _rate([s.hit for s in by_kind["history"]]),
        "lookalike_hit_at_1": _rate([s.hit for s in by_kind["lookalike"]]),
        "questions": {
            "current": len(by_kind["current"]),
            "stale_judged": len(stale),
            "history": len(by_kind["history"]),
            "lookalike": len(by_kind["lookalike"]),
        },
    }


def breakdown(chains: list[Chain], scored: list[Scored]) -> dict[str, dict[str, Any]]:
    """``metrics`` per kind of chain (``KINDS``: a chain counts under each of its kinds)."""
    kinds_of = {c.id: set(c.kinds) for c in chains}
    out = {}
    for kind in KINDS:
        picked = [s for s in scored if kind in kinds_of[s.question.chain]]
        if picked:
            out[kind] = {"chains": sum(kind in k for k in kinds_of.values()), **metrics(picked)}
    return out


@dataclass(frozen=True)
class Mark:
    """A memory marked superseded: by a ``remember`` result's ``supersedes``, or a recalled
    memory's ``superseded_by``. ``old``/``new``: statement ids (``new`` None when not resolved)."""

    old: str
    new: str | None
    via: str


def supersession_block(chains: list[Chain], marks: list[Mark], key_seen: bool) -> dict[str, Any]:
    """What was marked superseded against what the data says should be."""
    statements = {s.id: s for c in chains for s in c.statements}
    chain_of = {s.id: c for c in chains for s in c.statements}
    expected = {sid for sid, s in statements.items() if s.superseded_by}
    marked: dict[str, list[Mark]] = defaultdict(list)
    for m in marks:
        marked[m.old].append(m)
    false = sorted(set(marked) - expected)
    missed = sorted(expected - set(marked))
    by_kind = {}
    for kind in KINDS:
        ids = {sid for sid, c in chain_of.items() if kind in c.kinds}
        if ids:
            by_kind[kind] = {
                "expected": len(expected & ids),
                "marked": len(set(marked) & ids),
                "false": len(set(false) & ids),
                "missed": len(set(missed) & ids),
            }
    return {
        "supersessions": len(marked),
        "pairs_reported": len({(m.old, m.new) for m in marks if m.via == "remember"}),
        "marked_in_recall": len({m.old for m in marks if m.via == "recall"}),
        "expected": len(expected),
        "correct": len(expected & set(marked)),
        "false_supersessions": len(false),
        "missed_supersessions": len(missed),
        "false": [
            {
                "id": sid,
                "content": statements[sid].content if sid in statements else None,
                "by": sorted({m.new or "?" for m in marked[sid]}),
                "via": sorted({m.via for m in marked[sid]}),
            }
            for sid in false
        ],
        "missed": missed,
        "by_kind": by_kind,
        "supersedes_key_seen": key_seen,
    }


# -- the run -----------------------------------------------------------------------------------


def _resolve(ref: Any, memory_ids: Iterable[str]) -> str | None:
    """The stored memory a full id or a handle (a unique prefix of the id) names."""
    if not isinstance(ref, str) or not ref:
        return None
    found = [m for m in memory_ids if m == ref or m.startswith(ref)]
    return found[0] if len(found) == 1 else None


@dataclass
class Stored:
    """What storing the chains left: each group's project, each memory's statements (one, unless
    remember answered a repeat with the memory it already had) and the supersessions reported."""

    projects: dict[str, str] = field(default_factory=dict)
    statements_of: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    marks: list[Mark] = field(default_factory=list)
    key_seen: bool = False
    created: int = 0
    calls: int = 0
    seconds: float = 0.0

    def statement(self, ref: Any) -> str | None:
        mid = _resolve(ref, self.statements_of)
        return self.statements_of[mid][0] if mid is not None else None


@asynccontextmanager
async def tool_client(settings, ctx: BenchContext) -> AsyncIterator[Any]:
    """An MCP client on ``build_server`` over the bench's engine, in this process. The server's
    state is not closed here: ``bench_engine`` closes the engine after deleting the run's projects,
    which a closed engine could not do."""
    from mcp import Client

    from memlane.server.mcp.app import build_server

    server, _state = build_server(settings, engine=ctx.engine)
    async with Client(server) as client:
        yield client


async def call(client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """A tool call's structured result; a tool error stops the run (its message, not the memory)."""
    res = await client.call_tool(tool, args)
    if res.is_error:
        text = " ".join(getattr(c, "text", "") for c in res.content)
        raise RuntimeError(f"bench updates: {tool} failed: {text}")
    return res.structured_content or {}


async def store(client, ctx: BenchContext, chains: list[Chain], show: bool) -> Stored:
    """One ``remember`` call per statement, chains in the file's order, statements in theirs."""
    out = Stored()
    total = sum(len(c.statements) for c in chains)
    with progress(total, "remember", show, unit="statement") as bar:
        for c in chains:
            if c.group not in out.projects:
                out.projects[c.group] = ctx.project(f"updates-{c.group}")
            for s in c.statements:
                args = {"content": s.content, "project": out.projects[c.group]}
                if s.occurred_at:
                    args["occurred_at"] = s.occurred_at
                t0 = time.perf_counter()
                res = await call(client, "remember", args)
                out.seconds += time.perf_counter() - t0
                out.calls += 1
                out.created += res.get("status") == "created"
                out.statements_of[str(res["id"])].append(s.id)
                supersedes = res.get("supersedes")
                out.key_seen |= supersedes is not None
                for entry in supersedes or ():
                    ref = entry.get("id") if isinstance(entry, dict) else None
                    out.marks.append(
                        Mark(old=out.statement(ref) or f"unknown:{ref}", new=s.id, via="remember")
                    )
                bar.update(1)
    return out


async def ask(
    client, chains: list[Chain], stored: Stored, show: bool
) -> tuple[list[Scored], list[float], list[Mark]]:
    """Every question through ``recall`` in its chain's project; scored, timed, and any memory
    recall shows as superseded."""
    scored, ms, marks = [], [], []
    total = sum(len(c.questions) for c in chains)
    with progress(total, "recall", show, unit="q") as bar:
        for c in chains:
            for q in c.questions:
                args = {"query": q.text, "project": stored.projects[c.group], "limit": RECALL_LIMIT}
                t0 = time.perf_counter()
                res = await call(client, "recall", args)
                ms.append((time.perf_counter() - t0) * 1000)
                ranked = []
                for m in res.get("memories") or ():
                    sid = stored.statement(m.get("id")) or "?"
                    ranked.append(sid)
                    if m.get("superseded_by"):
                        marks.append(Mark(old=sid, new=stored.statement(m["superseded_by"]), via="recall"))
                scored.append(score(c, q, ranked))
                bar.update(1)
    return scored, ms, marks


async def locomo_supersessions(client, ctx: BenchContext, data: Path, show: bool) -> dict[str, Any]:
    """The conversations' turns through ``remember`` as ``bench locomo``'s tool path stores them;
    the supersessions remember reports, and an even sample of them as {new, old} text pairs."""
    from memlane.bench.locomo_data import load_conversations

    convs = load_conversations(data)
    pairs: list[dict[str, Any]] = []
    key_seen = False
    turns = sum(len(c.turns) for c in convs)
    t0 = time.perf_counter()
    with progress(turns, "locomo", show, unit="turn") as bar:
        for conv in convs:
            project = ctx.project(f"updates-locomo-{conv.name}")
            content_of: dict[str, str] = {}  # what this run stored, to name an old memory by its text
            for t in conv.turns:
                res = await call(
                    client,
                    "remember",
                    {
                        "content": t.content,
                        "project": project,
                        "occurred_at": t.occurred_at.isoformat(),
                        "metadata": {"dia_id": t.dia_id, "session": t.session},
                    },
                )
                content_of.setdefault(str(res["id"]), t.content)
                supersedes = res.get("supersedes")
                key_seen |= supersedes is not None
                for entry in supersedes or ():
                    entry = entry if isinstance(entry, dict) else {}
                    old_id = _resolve(entry.get("id"), content_of)
                    pairs.append(
                        {
                            "conversation": conv.name,
                            "new_dia_id": t.dia_id,
                            "new": t.content,
                            "old": entry.get("content") or (content_of.get(old_id) if old_id else None),
                            "old_date": entry.get("date"),
                        }
                    )
                bar.update(1)
    step = max(1, len(pairs) / LOCOMO_SAMPLE)
    sample = [pairs[int(i * step)] for i in range(min(LOCOMO_SAMPLE, len(pairs)))]
    return {
        "status": "measured",
        "source": data.name,
        "conversations": len(convs),
        "turns": turns,
        "supersessions": len(pairs),
        "turns_superseding": len({(p["conversation"], p["new_dia_id"]) for p in pairs}),
        "supersedes_key_seen": key_seen,
        "seconds": round(time.perf_counter() - t0, 1),
        "sample": sample,
        "sample_rule": f"up to {LOCOMO_SAMPLE} pairs evenly spaced over all of them, in storage order; "
        "unlabelled: for a human to judge",
    }


def _question_rows(scored: list[Scored]) -> list[dict[str, Any]]:
    return [
        {
            "id": s.question.id,
            "kind": s.question.kind,
            "text": s.question.text,
            "expect": list(s.question.expect),
            "hit": s.hit,
            "rank": s.rank,
            "stale_above": s.stale_above,
            "top": list(s.ranked[:HISTORY_K]),
        }
        for s in scored
    ]


async def run(
    settings,
    *,
    data: str | Path | None = None,
    chains: list[Chain] | None = None,
    locomo: str | Path | None = None,
    embedder=None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Store, ask, score; returns the JSON-ready report. ``chains`` (tests): these instead of the
    file's; ``locomo``: also the LoCoMo supersession count on that data (a missing path is reported
    as skipped)."""
    if chains is None:
        chains = load_chains(data)
    else:
        found = problems(chains)
        if found:
            raise ValueError("; ".join(found))
    source = Path(data).name if data is not None else DATA_NAME
    async with bench_engine(settings, embedder=embedder) as ctx:
        await asyncio.to_thread(ctx.engine.runtime.warm)  # the model's load is no remember's time
        async with tool_client(settings, ctx) as client:
            stored = await store(client, ctx, chains, show_progress)
            scored, recall_ms, recall_marks = await ask(client, chains, stored, show_progress)
            locomo_block: dict[str, Any] = {"status": "not run (--locomo-supersessions)"}
            if locomo is not None:
                path = Path(locomo)
                if path.exists():
                    locomo_block = await locomo_supersessions(client, ctx, path, show_progress)
                else:
                    locomo_block = {"status": f"skipped: no LoCoMo data at {path.name}"}
        vers = await versions(ctx.engine)
        config = config_snapshot(
            ctx,
            path="one remember call per statement through an in-process MCP client (build_server), "
            "content, project and occurred_at only; recall through the same client",
            recall_limit=RECALL_LIMIT,
            history_k=HISTORY_K,
            reference_time="none: recall's own now",
            projects="one per chain group (a chain without a group: its own)",
            scoring=SCORING,
        )
    marks = stored.marks + recall_marks
    return {
        "benchmark": "updates",
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "data": {
            "source": source,
            "chains": len(chains),
            "statements": sum(len(c.statements) for c in chains),
            "projects": len(stored.projects),
            "questions": dict(Counter(q.kind for c in chains for q in c.questions)),
            "chains_by_kind": {k: n for k in KINDS if (n := sum(k in c.kinds for c in chains))},
        },
        "metrics": metrics(scored),
        "by_kind": breakdown(chains, scored),
        "supersessions": supersession_block(chains, marks, stored.key_seen),
        "remember": {
            "calls": stored.calls,
            "memories": stored.created,
            "seconds": round(stored.seconds, 3),
            "per_second": round(stored.calls / stored.seconds, 2) if stored.seconds else None,
        },
        "recall_ms": percentiles(recall_ms),
        "questions": _question_rows(scored),
        "locomo": locomo_block,
        "config": config,
        "versions": vers,
    }


# -- the report --------------------------------------------------------------------------------


def _f(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def markdown(r: dict[str, Any]) -> str:
    d, m, s = r["data"], r["metrics"], r["supersessions"]
    ver = r["versions"]
    lines = [
        f"## Update chains: {d['chains']} chains, {sum(d['questions'].values())} questions",
        "",
        f"Mode {r['config']['mode']}, embedding {r['config']['embedding_model']}, memlane "
        f"{ver.get('memlane')} ({ver.get('git')}); recall limit {r['config']['recall_limit']}, "
        f"through an in-process MCP client.",
        "",
        "| figure | value | over |",
        "|---|---|---|",
        f"| current hit@1 | {_f(m['current_hit_at_1'])} | {m['questions']['current']} questions |",
        f"| stale above current | {_f(m['stale_above_rate'])} | {m['questions']['stale_judged']} questions |",
        f"| history hit@{HISTORY_K} | {_f(m['history_hit_at_3'])} | {m['questions']['history']} questions |",
        f"| look-alike hit@1 | {_f(m['lookalike_hit_at_1'])} | {m['questions']['lookalike']} questions |",
        f"| supersessions marked | {s['supersessions']} | {s['expected']} expected |",
        f"| false supersessions | {s['false_supersessions']} | |",
        f"| missed supersessions | {s['missed_supersessions']} | {s['expected']} expected |",
        "",
        "### By kind of chain",
        "",
        "| kind | chains | current hit@1 | stale above | history hit@3 | look-alike hit@1 | false sup. |",
        "|---|---|---|---|---|---|---|",
    ]
    sup = s.get("by_kind", {})
    for kind, b in r["by_kind"].items():
        lines.append(
            f"| {kind} | {b['chains']} | {_f(b['current_hit_at_1'])} | {_f(b['stale_above_rate'])} | "
            f"{_f(b['history_hit_at_3'])} | {_f(b['lookalike_hit_at_1'])} | "
            f"{sup.get(kind, {}).get('false', '-')} |"
        )
    if not s.get("supersedes_key_seen"):
        lines += ["", "No remember result carried `supersedes`: this memlane reports no supersession."]
    loc = r.get("locomo") or {}
    if loc.get("status") == "measured":
        lines += [
            "",
            f"LoCoMo ({loc['conversations']} conversations, {loc['turns']} turns through remember): "
            f"{loc['supersessions']} supersessions reported by {loc['turns_superseding']} turns; "
            f"a sample of {len(loc['sample'])} pairs is in the JSON.",
        ]
    elif loc:
        lines += ["", f"LoCoMo supersessions: {loc.get('status')}."]
    return "\n".join(lines) + "\n"
