"""``memlane bench replica``: read-your-writes through a read replica, on the tool path.

A standalone primary and a streaming hot standby of it (``pg_basebackup -R``, bench/
postgres.py) in a temporary directory; an MCP client in this process on ``build_server`` with
``database.read_urls`` naming the standby. Three phases of remember -> immediate recall pairs, each
remember a new fact with a unique marker and each recall (``explain``) a question about it:

1. ``steady``: the standby up. Reported: where each recall read (``read_from``), the replay wait
   (``read_wait_ms``) p50/p95/max, fallbacks to the primary and their reasons, tool errors, and
   whether the recall found the memory just remembered.
2. ``standby_stopped``: the standby is stopped (``pg_ctl stop -m fast``) while pairs keep running;
   every recall must still answer (from the primary) without an error and find its memory.
3. ``standby_back``: the standby started again; pairs run until a recall reads it again (after
   the replica's down time and a background probe), reported with how long that took.

Nothing is asserted here; the figures are the report (bench/results/replica.json).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from memlane.bench.common import percentiles, versions
from memlane.pipeline.config import DatabaseConfig
from memlane.pipeline.store.standalone import StandalonePostgres

BACK_TIMEOUT_S = 60.0  # phase 3 gives up after this long without a replica read


def _fact(i: int, marker: str) -> tuple[str, str]:
    subjects = ("deploy key", "billing export", "nightly backup", "staging database", "feature flag")
    subject = subjects[i % len(subjects)]
    return (
        f"the {subject} of service {marker} lives in vault path ops/{marker}/{i}",
        f"where does the {subject} of service {marker} live",
    )


async def _pair(client, i: int, phase: dict[str, Any]) -> None:
    marker = uuid.uuid4().hex[:10]
    content, query = _fact(i, marker)
    r = await client.call_tool("remember", {"content": content})
    if r.is_error:
        phase["errors"].append(f"remember: {r.content[0].text[:200]}")
        return
    started = time.perf_counter()
    r = await client.call_tool("recall", {"query": query, "explain": True})
    ms = (time.perf_counter() - started) * 1000
    if r.is_error:
        phase["errors"].append(f"recall: {r.content[0].text[:200]}")
        return
    data = r.structured_content or {}
    trace = data.get("trace", {})
    where = trace.get("read_from", "?")
    phase["reads"][where] += 1
    phase["recall_ms"].setdefault(where, []).append(ms)
    phase["wait_ms"].append(float(trace.get("read_wait_ms", 0.0)))
    if where != "replica":
        phase["fallbacks"][trace.get("read_reason", "?").split(" (")[0]] += 1
    phase["found"] += int(content in str(data.get("memories", "")))
    phase["pairs"] += 1


def _new_phase() -> dict[str, Any]:
    return {
        "pairs": 0,
        "found": 0,
        "reads": Counter(),
        "fallbacks": Counter(),
        "errors": [],
        "wait_ms": [],
        "recall_ms": {},
    }


def _summary(phase: dict[str, Any]) -> dict[str, Any]:
    waits = phase["wait_ms"]
    return {
        "pairs": phase["pairs"],
        "found_just_remembered": phase["found"],
        "reads": dict(phase["reads"]),
        "fallbacks": sum(phase["fallbacks"].values()),
        "fallback_reasons": dict(phase["fallbacks"]),
        "errors": len(phase["errors"]),
        "error_samples": phase["errors"][:5],
        "replay_wait_ms": {**percentiles(waits), "max": round(max(waits), 3) if waits else 0.0},
        "recall_ms": {where: percentiles(ms) for where, ms in phase["recall_ms"].items()},
        **({k: phase[k] for k in ("seconds_until_replica_again",) if k in phase}),
    }


async def run(*, pairs: int = 100, stopped_pairs: int = 30, wait_ms: float = 200.0, embedder=None) -> dict:
    """The three phases (module docstring); ``embedder``: a loaded model (tests), else the default."""
    from mcp import Client

    from memlane.pipeline.engine import Engine
    from memlane.server.mcp.app import build_server
    from memlane.server.settings import Settings

    root = Path(tempfile.mkdtemp(prefix="memlane-bench-replica-"))
    primary = StandalonePostgres(root / "primary").init().start()
    standby = None
    try:
        url = primary.create_app_database("memlane", "memlane_app")
        standby = primary.standby(root / "standby")
        standby.wait_replaying(primary)
        read_url = url.replace(f":{primary.port}/", f":{standby.port}/")
        settings = Settings(
            data_dir=root / "data",
            database=DatabaseConfig(
                url=SecretStr(url), read_urls=[SecretStr(read_url)], replica_wait_ms=wait_ms
            ),
        )
        engine = Engine(settings.engine(), embedder=embedder)
        server, state = build_server(settings, engine=engine)
        phases: dict[str, dict[str, Any]] = {}
        try:
            async with Client(server) as client:
                for i in range(3):  # warm: the model, the pools, the replica's caches
                    await _pair(client, i, _new_phase())

                steady = phases["steady"] = _new_phase()
                for i in range(pairs):
                    await _pair(client, i, steady)

                stopped = phases["standby_stopped"] = _new_phase()
                stopping = asyncio.ensure_future(asyncio.to_thread(standby.stop))
                for i in range(stopped_pairs):  # the first ones run while the standby shuts down
                    await _pair(client, i, stopped)
                await stopping

                await asyncio.to_thread(standby.start)
                back = phases["standby_back"] = _new_phase()
                started, i = time.monotonic(), 0
                while back["reads"]["replica"] == 0 and time.monotonic() - started < BACK_TIMEOUT_S:
                    await _pair(client, i, back)
                    i += 1
                    await asyncio.sleep(0.1)
                back["seconds_until_replica_again"] = round(time.monotonic() - started, 2)
                for i in range(10):  # and it keeps being used
                    await _pair(client, i, back)
            info = await versions(engine) if engine.runtime.store is not None else await versions()
        finally:
            await state.close()
    finally:
        if standby is not None:
            standby.stop()
        primary.stop()
    return {
        "bench": "replica",
        "what": "remember then immediate recall over MCP (in process), recall reading a streaming hot "
        "standby with read-your-writes; the standby stopped mid-run, then started again",
        "settings": {"replica_wait_ms": wait_ms, "pairs": pairs, "stopped_pairs": stopped_pairs},
        "versions": info,
        "phases": {name: _summary(p) for name, p in phases.items()},
    }


def markdown(r: dict[str, Any]) -> str:
    lines = [
        f"Read replica, read-your-writes (replica_wait_ms = {r['settings']['replica_wait_ms']:g})",
        "",
        "| phase | pairs | found | replica reads | primary reads | fallbacks | errors "
        "| replay wait p50 / p95 / max ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, p in r["phases"].items():
        w = p["replay_wait_ms"]
        lines.append(
            f"| {name} | {p['pairs']} | {p['found_just_remembered']} | {p['reads'].get('replica', 0)} "
            f"| {p['reads'].get('primary', 0)} | {p['fallbacks']} | {p['errors']} "
            f"| {w['p50']:.2f} / {w['p95']:.2f} / {w['max']:.2f} |"
        )
    back = r["phases"].get("standby_back", {})
    if "seconds_until_replica_again" in back:
        lines += ["", f"The restarted standby was read again after {back['seconds_until_replica_again']} s."]
    return "\n".join(lines) + "\n"
