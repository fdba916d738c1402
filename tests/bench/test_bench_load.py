"""``memlane bench load``: a short real run (a server process on a temporary embedded
database, a few clients for ~3 s) writes the documented JSON with nothing lost or duplicated; three
servers on a standalone PostgreSQL behind the round-robin client lose nothing and answer as one
fresh server does; and the after-run checks themselves find a lost, a duplicated and a half-written
memory, and a differing answer, when there is one."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest
from support.processes import MEMLANE, server_env

from memlane.bench.loadbench import mismatches, verify

pytestmark = pytest.mark.anyio


@pytest.mark.slow
def test_bench_load_reports_every_field_and_loses_nothing():
    out = Path(tempfile.mkdtemp(prefix="memlane-test-load-")) / "load.json"
    env = server_env(Path("unused"))
    env.pop("MEMLANE_DATA_DIR")  # the bench makes (and removes) its own temporary database
    proc = subprocess.run(
        [MEMLANE, "bench", "load", "--clients", "3", "--seconds", "3", "--servers", "1", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    for key in (
        "clients",
        "seconds",
        "servers",
        "errors",
        "acknowledged",
        "lost",
        "duplicated",
        "throughput_per_s",
        "latency_ms",
        "single_client_recall_p95_ms",
        "cores",
    ):
        assert key in r, key
    assert (r["clients"], r["seconds"], r["servers"]) == (3, 3.0, 1)
    for tool in ("remember", "recall"):
        assert {"p50", "p95", "p99"} <= set(r["latency_ms"][tool])
        assert r["latency_ms"][tool]["n"] > 0, f"no {tool} completed"
    assert r["errors"] == 0, r["error_samples"]
    assert r["acknowledged"] > 0
    assert r["lost"] == r["duplicated"] == r["half_written"] == 0
    assert r["throughput_per_s"] > 0 and r["single_client_recall_p95_ms"] > 0 and r["cores"] >= 1
    assert "| recall |" in proc.stdout  # the Markdown table on stdout


async def test_the_after_run_check_counts_lost_duplicated_and_half_written_memories(engine, database_url):
    """verify() is what makes "lost 0, duplicated 0" mean something: here one acknowledged marker
    has no row, one has two (under different contents), one row has no vector."""
    p = "bench-load-check"
    for marker, content in (("m1", "one"), ("m2", "two"), ("m2", "two again"), ("m4", "four")):
        await engine.remember({"content": content, "project": p, "metadata": {"load_marker": marker}})
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("UPDATE memories SET embedding = NULL WHERE content = 'four'")
    r = verify(database_url, p, ["m1", "m2", "m3", "m4"])
    assert r == {"lost": 1, "duplicated": 1, "half_written": 1, "stored_rows": 4}
    assert verify(database_url, p, ["m1", "m4"])["lost"] == 0


@pytest.mark.slow
def test_three_servers_on_a_standalone_postgres_answer_as_one():
    out = Path(tempfile.mkdtemp(prefix="memlane-test-load-")) / "load.json"
    env = server_env(Path("unused"))
    env.pop("MEMLANE_DATA_DIR")
    proc = subprocess.run(
        [MEMLANE, "bench", "load", "--clients", "3", "--seconds", "3", "--servers", "3"]
        + ["--database-url", "standalone", "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["servers"] == 3 and "standalone PostgreSQL" in r["config"]["database"]
    assert r["errors"] == 0, r["error_samples"]
    assert r["acknowledged"] > 0 and r["lost"] == r["duplicated"] == r["half_written"] == 0
    for tool in ("remember", "recall"):
        assert r["latency_ms"][tool]["n"] > 0 and r["calls_per_s"][tool] > 0, tool
    # Round-robin: every server took requests, none more than one more per client than another.
    sent = r["requests_per_server"]
    assert len(sent) == 3 and min(sent) > 0 and max(sent) - min(sent) <= r["clients"], sent
    check = r["recall_check"]
    assert (check["servers"], check["questions"]) == (3, 12)
    assert check["empty_answers"] < check["questions"]  # the questions find something
    # Cached category centroids are checked against the database: no server answers differently,
    # not even right after the load (the store is too small for a vector index to appear).
    assert check["mismatches"] == check["mismatches_right_after_load"] == 0, check
    assert check["settle_s"] == 0


def test_the_recall_check_counts_each_differing_answer():
    reference = [["a", "b"], ["c"]]
    assert mismatches(reference, [[["a", "b"], ["c"]], [["a", "b"], ["c"]]]) == 0
    assert mismatches(reference, [[["b", "a"], ["c"]], [["a", "b"], []]]) == 2
