"""``memlane bench mcp``: what an MCP host sees. Cold start of ``memlane serve`` over stdio (spawn
to a completed ``tools/list``, and to the first answered recall on a store of ``--populate``
memories, median over N spawns), then remember and recall latency over MCP once the model has
loaded: ``--calls`` remembers one call at a time, as an assistant stores turns, give stores/s.
With ``--cold-database`` every spawn also finds the embedded PostgreSQL stopped and starts it, as
the first server a client spawns does.

The host spawns the server with only the environment it is given (the SDK passes a small safe
set), so every ``MEMLANE_*`` variable and the data directory are passed explicitly. Unless the
settings name a store, the bench starts a temporary embedded PostgreSQL itself and keeps it running
while the servers join it: the spawns then time memlane's own start-up (the database starts in the
background anyway and is not on the ``tools/list`` path), and no server is killed while it
initialises a data directory.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from memlane.bench.common import (
    delete_projects,
    percentiles,
    stop_embedded,
    uses_configured_store,
    versions,
)
from memlane.bench.corpus import Corpus
from memlane.pipeline.store.embedded import start_embedded


def server_command() -> tuple[str, list[str]]:
    """The ``memlane`` next to this interpreter (the venv's), else on PATH, else ``python -m``."""
    exe = Path(sys.executable).with_name("memlane")
    if exe.exists():
        return str(exe), ["serve"]
    found = shutil.which("memlane")
    if found:
        return found, ["serve"]
    return sys.executable, ["-m", "memlane.server.cli.main", "serve"]


def server_env(settings, data_dir: Path | None, config_path: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.upper().startswith("MEMLANE_")}
    if config_path:
        env["MEMLANE_CONFIG"] = str(Path(config_path).resolve())
    # The settings decide (they may override the environment); the children must agree with them.
    env.pop("MEMLANE_DATABASE__URL", None)
    env.pop("MEMLANE_DATA_DIR", None)
    if settings.database.url is not None:
        env["MEMLANE_DATABASE__URL"] = settings.database.url.get_secret_value()
    if data_dir is not None:
        env["MEMLANE_DATA_DIR"] = str(data_dir)
    return env


def _check(result, what: str):
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content)
        raise RuntimeError(f"{what} failed over MCP: {text}")
    return result


async def _call_ms(client, tool: str, args: dict[str, Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    result = _check(await client.call_tool(tool, args), tool)
    return (time.perf_counter() - t0) * 1000, result


async def warm_calls(client, calls: int, project: str, turns: list | None = None) -> dict[str, Any]:
    """Remember (one call each, in turn) then recall ``calls`` times each; returns their timings,
    the remembers' wall time and the ids to forget. ``turns``: (content, occurred_at) to remember
    instead of the corpus's memories, as a client stores a conversation."""
    corpus = Corpus(seed=11)
    remember_ms, recall_ms, ids = [], [], []
    items = turns[:calls] if turns else [(it.content, None) for it in corpus.take(calls)]
    t0 = time.perf_counter()
    for content, when in items:
        args = {"content": content, "project": project}
        if when is not None:
            args["occurred_at"] = when.isoformat()
        ms, res = await _call_ms(client, "remember", args)
        remember_ms.append(ms)
        ids.append((res.structured_content or {}).get("id"))
    remember_wall_s = time.perf_counter() - t0
    for q in corpus.questions(calls):
        ms, _ = await _call_ms(client, "recall", {"query": q.text, "project": project})
        recall_ms.append(ms)
    return {
        "remember_ms": remember_ms,
        "remember_wall_s": remember_wall_s,
        "recall_ms": recall_ms,
        "ids": [i for i in ids if i],
    }


async def spawn(
    params,
    errlog,
    *,
    calls: int = 0,
    project: str = "",
    question: str = "warm-up: is anything stored?",
    turns: list | None = None,
) -> dict[str, Any]:
    """One spawn: time to initialized, to tools/list done, to the first answered recall of
    ``question`` in ``project``, and (when ``calls``) the warm calls."""
    from mcp import Client
    from mcp.client.stdio import stdio_client

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    async with Client(stdio_client(params, errlog=errlog)) as client:
        out["initialize_ms"] = (time.perf_counter() - t0) * 1000
        tools = await client.list_tools()
        out["tools_list_ms"] = (time.perf_counter() - t0) * 1000
        out["tools"] = sorted(t.name for t in tools.tools)
        # Every spawn: the first answered recall (database open, model loaded), what a host waits
        # for before memory works.
        _, first = await _call_ms(client, "recall", {"query": question, "project": project})
        out["first_recall_hits"] = len((first.structured_content or {}).get("memories") or [])
        out["ready_ms"] = (time.perf_counter() - t0) * 1000
        if calls:
            # A conversation goes into a project of its own, as a client's new chat would.
            target = f"{project}-conversation" if turns else project
            out.update(await warm_calls(client, calls, target, turns))
            for mid in out["ids"]:  # leave nothing behind in a configured store
                await client.call_tool("forget", {"id": mid})
        t_close = time.perf_counter()
    out["shutdown_ms"] = (time.perf_counter() - t_close) * 1000
    return out


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
        "all": [round(v, 1) for v in values],
    }


async def run(
    settings,
    *,
    runs: int = 5,
    calls: int = 20,
    populate: int = 0,
    cold_database: bool = False,
    conversation: str | None = None,
    config_path: str | None = None,
) -> dict[str, Any]:
    from mcp import StdioServerParameters

    turns = None
    if conversation:
        from memlane.bench.locomo_data import load_conversations

        turns = [(t.content, t.occurred_at) for t in load_conversations(conversation)[0].turns]
        calls = min(calls, len(turns)) if calls else len(turns)

    cfg = settings.engine()
    temp = None if uses_configured_store(cfg) else Path(tempfile.mkdtemp(prefix="memlane-bench-mcp-"))
    data_dir = temp or cfg.data_dir
    cold = temp if cold_database else None  # a configured store is not the bench's to stop
    project = f"bench-mcp-{uuid.uuid4().hex[:8]}"
    try:
        if temp is not None:
            await asyncio.to_thread(start_embedded, temp)
        question = "warm-up: is anything stored?"
        if populate:
            question = await _populate(cfg.model_copy(update={"data_dir": data_dir}), project, populate)
        command, args = server_command()
        params = StdioServerParameters(command=command, args=args, env=server_env(cfg, data_dir, config_path))
        log_path = Path(tempfile.gettempdir()) / f"memlane-bench-mcp-{uuid.uuid4().hex[:6]}.log"
        spawns = await _spawns(params, log_path, runs, calls, project, question, turns=turns)
        cold_spawns = None
        if cold is not None:
            cold_spawns = await _spawns(
                params, log_path, runs, 0, project, question, before=lambda: stop_embedded(cold)
            )
    finally:
        if temp is not None:
            stop_embedded(temp)
            shutil.rmtree(temp, ignore_errors=True)
        elif populate:
            await _unpopulate(cfg, project)
    report = build_report(spawns, runs, calls, command, args, temp is not None, cfg, await versions())
    report["config"]["populated"] = populate
    report["config"]["remembered"] = (
        f"the turns of {conversation}, with their dates, into a new project"
        if turns
        else "the latency corpus"
    )
    if cold_spawns is not None:
        report["cold_database"] = {
            "tools_list_ms": _summary([s["tools_list_ms"] for s in cold_spawns]),
            "first_recall_ms": _summary([s["ready_ms"] for s in cold_spawns]),
            "what": "the embedded PostgreSQL stopped before each spawn: the server starts it",
        }
    return report


async def _populate(cfg, project: str, n: int) -> str:
    """``n`` corpus memories in ``project`` (in batches, in-process: the set-up, not what is
    timed); returns a question about the first of them, for the spawns' first recall."""
    from memlane.pipeline.engine import Engine

    corpus = Corpus(seed=5)
    items = corpus.take(n)
    engine = Engine(cfg)
    await engine.open()
    try:
        for i in range(0, n, 256):
            await engine.remember_many(
                [
                    {"content": it.content, "project": project, "occurred_at": it.occurred_at}
                    for it in items[i : i + 256]
                ]
            )
    finally:
        await engine.close()
    return " ".join(items[0].content.split()[:8])


async def _unpopulate(cfg, project: str) -> None:
    from memlane.pipeline.engine import Engine

    engine = Engine(cfg)
    await engine.open()
    try:
        await delete_projects(engine, [project])
    finally:
        await engine.close()


async def _spawns(
    params, log_path: Path, runs: int, calls: int, project: str, question: str, before=None, turns=None
) -> list[dict[str, Any]]:
    """``runs`` spawns, the last with the warm calls (into a project of its own); the servers'
    stderr goes to ``log_path``, which is kept (and named) only when something fails."""
    spawns = []
    with open(log_path, "w", encoding="utf-8") as errlog:
        try:
            for i in range(runs):
                if before is not None:
                    before()
                print(f"spawn {i + 1}/{runs}", file=sys.stderr)
                last = i == runs - 1
                spawns.append(
                    await spawn(
                        params, errlog, calls=calls if last else 0, project=project, question=question
                    )
                )
        except BaseException:
            print(f"memlane bench mcp: the servers' stderr is in {log_path}", file=sys.stderr)
            raise
    log_path.unlink(missing_ok=True)
    return spawns


def build_report(spawns, runs, calls, command, args, temporary, cfg, vers) -> dict[str, Any]:
    warm = spawns[-1]
    return {
        "benchmark": "mcp",
        "runs": runs,
        "transport": "stdio",
        "tools": warm["tools"],
        "cold_start": {
            "initialize_ms": _summary([s["initialize_ms"] for s in spawns]),
            "tools_list_ms": _summary([s["tools_list_ms"] for s in spawns]),
            "shutdown_ms": _summary([s["shutdown_ms"] for s in spawns]),
        },
        "ready_ms": round(warm["ready_ms"], 1),
        "first_recall_ms": _summary([s["ready_ms"] for s in spawns]),
        "first_recall_hits": [s.get("first_recall_hits") for s in spawns],
        "remember_ms": _calls(warm["remember_ms"]),
        "stores_per_s": round(len(warm["remember_ms"]) / warm["remember_wall_s"], 1)
        if warm["remember_ms"]
        else None,
        "recall_ms": _calls(warm["recall_ms"]),
        "config": {
            "mode": "offline" if cfg.llm.provider == "none" else "llm",
            "embedding_model": _model_id(cfg),
            "command": [Path(command).name, *args],  # (the name: a report names no machine's paths)
            "client": "mcp.Client(StdioServerParameters), protocol negotiated by the SDK (auto)",
            "database": "temporary embedded PostgreSQL, started by the bench before the spawns"
            if temporary
            else "configured store",
            "calls": calls,
            "ready": "spawn -> first recall answered (database open, model loaded), last spawn; "
            "first_recall_ms: the same over every spawn",
        },
        "versions": vers,
    }


def _model_id(cfg) -> str:
    """The model the spawned servers use (a store of the other built-in model aside)."""
    from memlane.pipeline.errors import ConfigError
    from memlane.pipeline.providers.embedding import make_embedder

    try:
        return make_embedder(cfg.embedding).model_id
    except ConfigError:
        return f"{cfg.embedding.provider}:{cfg.embedding.model}"


def _calls(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 2), **percentiles(values), "n": len(values)}
