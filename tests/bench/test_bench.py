"""``memlane bench``: the LoCoMo protocol on a synthetic conversation in the LoCoMo format, the
report layouts, the ablation, and one real LoCoMo conversation when ../shared/locomo is there.
Speed is never asserted: these check what the benchmarks report, not how fast the machine is."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import psycopg
import pytest
from support.processes import ROOT

from memlane.bench import locomo, mcpbench
from memlane.bench import report as report_module
from memlane.bench.locomo_data import load_conversations, parse_evidence
from memlane.bench.methods import ablation_methods
from memlane.pipeline.recall.query import Ablation
from memlane.server.cli import main as cli
from memlane.server.settings import load

LOCOMO_30 = ROOT / ".." / "shared" / "locomo" / "30.json"
RECALL_KEYS = {"all", "cat1_4", "by_category"}
K = {"1", "5", "10", "20"}
POISON = "ZEBRA-OBSERVATION-SHOULD-NEVER-BE-STORED"


def _turn(session: int, i: int, speaker: str, text: str, **extra) -> dict:
    return {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text, **extra}


def synthetic_conversation() -> dict:
    """Two speakers, three sessions with turns, one dated session without turns (must not be the
    reference time), annotation fields that must never be read, and evidence in every known mess."""
    return {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn(1, 1, "Alice", "Hi Bob, how was the weekend?"),
            _turn(1, 2, "Bob", "My pet iguana Ziggy learned to climb the bookshelf."),
            _turn(
                1, 3, "Alice", "Look at my new pottery bowl!", blip_caption="a blue ceramic bowl on a table"
            ),
        ],
        "session_2_date_time": "10:04 am on 20 June, 2023",
        "session_2": [
            _turn(2, 1, "Bob", "I started volunteering at the animal shelter on Saturdays."),
            _turn(2, 2, "Alice", "That sounds lovely, which animals do you look after?"),
            _turn(2, 3, "Bob", "Mostly rabbits and two old greyhounds named Pepper and Salt."),
        ],
        "session_3_date_time": "7:30 pm on 2 August, 2023",
        "session_3": [
            _turn(3, 1, "Alice", "I am moving to Lisbon in September for a new job."),
            _turn(3, 2, "Bob", "Congratulations! Lisbon has great tiles and custard tarts."),
        ],
        "session_4_date_time": "9:00 am on 1 January, 2030",  # no session_4 turns
        "events_session_1": {"Alice": [POISON]},
        "session_1_observation": {"Alice": [[POISON, "D1:1"]]},
        "session_1_summary": POISON,
        "qa": [
            {
                "question": "What is the name of Bob's pet iguana?",
                "answer": "Ziggy",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "Which animals does Bob look after at the shelter?",
                "answer": "rabbits, greyhounds",
                "evidence": ["D2:1; D2:3"],
                "category": 1,
            },
            {
                "question": "Where is Alice moving?",
                "answer": "Lisbon",
                "evidence": ["D:3:1", "D", "D9:9"],
                "category": 2,
            },
            {
                "question": "What did Alice make in pottery class?",
                "answer": "a bowl",
                "evidence": ["D1:3"],
                "category": 3,
            },
            {
                "question": "What is Bob's cat called?",
                "adversarial_answer": "none",
                "evidence": [],
                "category": 5,
            },
        ],
    }


@pytest.fixture
def synthetic_file(tmp_path) -> Path:
    path = tmp_path / "locomo" / "99.json"
    path.parent.mkdir()
    path.write_text(json.dumps(synthetic_conversation()), encoding="utf-8")
    return path


@pytest.fixture
def bench_settings(database_url, tmp_path):
    """Settings on this test's database, read as the CLI reads them (through load())."""
    return load(data_dir=tmp_path, database={"url": database_url})


@pytest.fixture
def shared_embedder(monkeypatch, embedder):
    """Engines built by the CLI reuse the session's loaded model instead of loading their own."""
    monkeypatch.setattr("memlane.pipeline.runtime.make_embedder", lambda cfg: embedder)
    return embedder


def _assert_recall_block(block: dict) -> None:
    assert set(block) == RECALL_KEYS
    for sub in [block["all"], block["cat1_4"], *block["by_category"].values()]:
        assert set(sub) == K
        assert all(v is None or 0.0 <= v <= 1.0 for v in sub.values())


# -- reading the data -------------------------------------------------------------------------


def test_evidence_is_split_normalised_and_unknown_ids_stay_in_the_denominator():
    notes: Counter = Counter()
    known = {"D8:6", "D9:17", "D11:26", "D1:1"}
    assert parse_evidence(["D8:6; D9:17"], known, notes) == ("D8:6", "D9:17")
    assert parse_evidence(["D:11:26", "D", "D10:19", "D1:1", "D1:1"], known, notes) == (
        "D11:26",
        "D10:19",
        "D1:1",
    )
    assert notes == Counter(split=1, normalised=1, dropped_malformed=1, unknown_kept=1, duplicates=1)


def test_conversation_mapping_follows_the_protocol(synthetic_file):
    [conv] = load_conversations(synthetic_file.parent)
    assert conv.name == "99" and len(conv.turns) == 8
    assert conv.last_session == 3  # session_4 has a date but no turns
    assert conv.reference_time.isoformat() == "2023-08-02T19:30:00+00:00"
    first = conv.turns[0]
    assert (first.dia_id, first.session, first.content) == ("D1:1", 1, "Alice: Hi Bob, how was the weekend?")
    assert first.occurred_at.isoformat() == "2023-05-08T13:56:00+00:00"
    assert conv.turns[2].content.endswith(" [shares a photo: a blue ceramic bowl on a table]")
    assert all(POISON not in t.content for t in conv.turns)
    assert len(conv.questions) == 4  # the question without evidence is not asked
    assert conv.questions[2].evidence == ("D3:1", "D9:9")


def test_release_file_layout_is_read_too(tmp_path):
    """data/locomo10.json of the release: a list of samples with the conversation nested."""
    conv = synthetic_conversation()
    qa = conv.pop("qa")
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([{"sample_id": "conv-99", "conversation": conv, "qa": qa}]), encoding="utf-8")
    [c] = load_conversations(path)
    assert c.name == "conv-99" and len(c.questions) == 4 and len(c.turns) == 8


def test_ablation_grows_with_the_arms_and_switches():
    names = [m.name for m in ablation_methods()]
    assert names == [
        "vector",
        "keyword",
        "graph",
        "temporal",
        "fused-no-vector",
        "fused-no-keyword",
        "fused-no-graph",
        "fused-no-temporal",
        "fused",
        "fused-no-adjustments",
        "fused-no-neighbour-lift",
        "fused-neighbour-lift-0.15",
        "fused-neighbour-lift-0.6",
        "fused-neighbour-window-1",
        "fused-rrf",
        "fused-rrf-vector",
        "fused-graph-activation",  # the graph algorithm not configured (mpfp is the default)
        "fused-no-threshold",
    ]
    two = [m.name for m in ablation_methods(arms=("vector", "keyword"))]
    assert two[:3] == ["vector", "keyword", "fused"]

    four = ablation_methods(arms=("vector", "keyword", "graph", "temporal"))
    names = [m.name for m in four]
    assert names[:4] == ["vector", "keyword", "graph", "temporal"]
    assert "fused-no-graph" in names and "fused-no-adjustments" in names
    [no_adjust] = [m for m in four if m.name == "fused-no-adjustments"]
    assert no_adjust.ablation() == Ablation(
        arms=("vector", "keyword", "graph", "temporal"), adjustments=False
    )
    [rrf] = [m for m in four if m.name == "fused-rrf"]
    assert rrf.recall_config == {"fusion": "rrf"}


# -- running the benchmarks -------------------------------------------------------------------


def test_locomo_report_layout_scores_and_cleanup(synthetic_file, bench_settings, embedder, database_url):
    report = asyncio.run(
        locomo.run(bench_settings, synthetic_file.parent, ablate=True, embedder=embedder, show_progress=False)
    )
    for key in (
        "dataset",
        "conversations",
        "questions",
        "recall",
        "latency_ms",
        "remember",
        "config",
        "versions",
        "ablation",
    ):
        assert key in report
    assert (report["dataset"], report["conversations"], report["questions"]) == ("locomo", 1, 4)
    _assert_recall_block(report["recall"])
    assert set(report["recall"]["by_category"]) == {"1", "2", "3", "4"}
    # The iguana question's only evidence turn shares its rare words: found within the first five.
    assert report["recall"]["by_category"]["4"]["5"] == 1.0
    assert report["recall"]["by_category"]["2"]["20"] <= 0.5  # D9:9 does not exist: never found
    lat = report["latency_ms"]
    assert {"p50", "p95", "stages"} <= set(lat) and "retrieval" in lat["stages"]
    assert set(lat["stages"]["retrieval"]) == {"p50", "p95"}
    assert report["remember"]["memories"] == 8 and report["remember"]["per_second"] > 0
    tok = report["tokens_delivered"]  # the rendered result, as the client's model reads it
    assert 0 < tok["mean"] and tok["p95"] <= tok["max_tokens"] and tok["limit"] == 20
    unrel = report["unrelated"]
    assert unrel["questions"] >= 40 and unrel["projects"] == 1 and unrel["recalls"] == unrel["questions"]
    assert 0 <= unrel["mean_memories"] <= unrel["max_memories"] <= 20
    cfg = report["config"]
    assert cfg["mode"] == "offline" and cfg["embedding_model"] == embedder.model_id
    assert "last session that has turns" in cfg["reference_time"]
    assert report["evidence"] == {
        "split": 1,
        "normalised": 1,
        "duplicates": 0,
        "dropped_malformed": 1,
        "unknown_kept": 1,
        "questions_skipped": 0,
    }
    assert {"vector", "keyword", "fused"} <= set(report["ablation"])
    for block in report["ablation"].values():
        _assert_recall_block(block)
    assert report["ablation"]["fused"] == report["recall"]
    assert report["versions"]["postgresql"]
    json.dumps(report)  # JSON-ready as it is
    with psycopg.connect(database_url) as conn:  # the run's projects are gone
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_bench_all_writes_every_result(synthetic_file, tmp_path, monkeypatch, shared_embedder, database_url):
    """Through the real command line: locomo on the synthetic file plus a tiny latency run."""
    monkeypatch.setenv("MEMLANE_DATABASE__URL", database_url)
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "results"
    argv = [
        "bench",
        "all",
        "--output",
        str(out),
        "--locomo",
        str(synthetic_file),
        "--memories",
        "40,80",
        "--queries",
        "3",
        "--quiet",
    ]
    assert cli.main(argv) == 0
    for name in ("locomo", "latency"):
        for ext in ("json", "md", "png"):
            assert (out / f"{name}.{ext}").stat().st_size > 0
    lat = json.loads((out / "latency.json").read_text())
    assert [s["memories"] for s in lat["sizes"]] == [40, 80]
    assert [s["remember"]["created"] for s in lat["sizes"]] == [40, 40]  # the store grows, nothing twice
    assert set(lat["growth"]) == {"40", "80"}
    for size in lat["sizes"]:
        assert {
            "remember",
            "embedding",
            "remember_vs_embedding",
            "recall",
            "floor",
            "recall_vs_floor",
        } <= set(size)
        assert size["remember"]["per_second"] > 0 and size["embedding"]["per_second"] > 0
        assert {"p50", "p95", "embed", "query"} <= set(size["floor"]) and "retrieval" in size["recall"][
            "stages"
        ]
    targets = {t["name"]: t for t in lat["targets"]}
    assert len(targets) == 3 and all(
        t["result"] in ("pass", "FAIL", "not measured") for t in targets.values()
    )
    assert targets["recall p50 at the largest size (none over 10k) / p50 at 10k"]["result"] == "not measured"
    assert lat["config"]["mode"] == "offline" and "Targets" in (out / "latency.md").read_text()
    assert "ablation" in json.loads((out / "locomo.json").read_text())
    with psycopg.connect(database_url) as conn:  # both runs removed their projects
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


@pytest.mark.slow
def test_mcp_bench_reports_cold_start_and_call_latency():
    """Spawns real servers on a temporary embedded database the bench makes, fills and removes:
    warm with PostgreSQL kept running, then cold (stopped before the spawn, started by the server)."""
    settings = load(database={"url": None}, data_dir=None)
    report = asyncio.run(mcpbench.run(settings, runs=1, calls=3, populate=30, cold_database=True))
    assert report["cold_start"]["tools_list_ms"]["median"] > 0
    assert {"remember", "recall", "forget", "update"} <= set(report["tools"])
    assert report["remember_ms"]["n"] == 3 and report["recall_ms"]["n"] == 3 and report["ready_ms"] > 0
    assert report["first_recall_ms"]["all"] == [report["ready_ms"]]  # one spawn: its first recall
    assert report["first_recall_hits"][0] >= 1  # the first recall searched the populated store
    assert report["stores_per_s"] > 0 and report["config"]["populated"] == 30
    cold = report["cold_database"]
    assert len(cold["first_recall_ms"]["all"]) == 1 and cold["first_recall_ms"]["median"] > 0
    assert "stores/s" in report_module.mcp_markdown(report)


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_llm_bench_measures_both_paths_against_the_stand_in(bench_settings, embedder):
    from memlane.bench import llmbench

    report = llmbench.run(
        bench_settings, delay_ms=20, memories=60, queries=4, embedder=embedder, show_progress=False
    )
    report = asyncio.run(report)
    assert report["offline"]["llm_calls_per_recall"] == 0
    assert report["llm"]["llm_calls_per_recall"] == 4  # intent, synthesis, HyDE, rerank; cache off
    assert report["llm"]["stages"]["rerank"]["p50"] >= 20  # it waited for the stand-in
    assert report["target"]["limit_ms"] == pytest.approx(report["offline"]["recall"]["p50"] + 50, abs=0.01)
    assert "## LLM stages against a stand-in API answering after 20 ms" in llmbench.markdown(report)


@pytest.mark.slow  # a real conversation through the whole benchmark, end to end
@pytest.mark.skipif(not LOCOMO_30.exists(), reason="../shared/locomo is not there")
def test_one_real_locomo_conversation(bench_settings, embedder):
    report = asyncio.run(locomo.run(bench_settings, LOCOMO_30, embedder=embedder, show_progress=False))
    assert (report["conversations"], report["questions"]) == (1, 105)
    assert report["remember"]["turns"] == 369
    _assert_recall_block(report["recall"])
    # Far above chance (20 of 369 turns is 0.05) whatever the pipeline's current quality.
    assert report["recall"]["all"]["20"] > 0.3


# -- the tool path is the MCP tools' path -------------------------------------------------------


async def _mcp_lists(settings, embedder, conv, project) -> list[list[str]]:
    """Every turn through an MCP client's remember, every question through its recall."""
    from support.clients import call_ok, in_process

    out = []
    async with in_process(settings, embedder=embedder) as client:
        for t in conv.turns:
            args = {
                "content": t.content,
                "project": project,
                "occurred_at": t.occurred_at.isoformat(),
                "metadata": {"dia_id": t.dia_id, "session": t.session},
            }
            await call_ok(client, "remember", args)
        for q in conv.questions:
            args = {
                "query": q.text,
                "project": project,
                "limit": locomo.RECALL_LIMIT,
                "max_tokens": 100_000,
                "reference_time": conv.reference_time.isoformat(),
            }
            res = await call_ok(client, "recall", args)
            out.append([m["content"] for m in res["memories"]])
    return out


@pytest.mark.anyio
async def test_the_tool_path_ranks_what_an_mcp_client_gets(synthetic_file, bench_settings, embedder):
    """The same conversation stored and asked through a real MCP client and through the bench's tool
    path: the same memories, in the same order, for every question (the second pass too, as
    access counting changes nothing)."""
    from memlane.bench.common import bench_engine

    [conv] = load_conversations(synthetic_file)
    via_mcp = await _mcp_lists(bench_settings, embedder, conv, "via-mcp")
    assert any(via_mcp), "the MCP client found nothing at all: the comparison would be empty"
    async with bench_engine(bench_settings, embedder=embedder) as ctx:
        [ing], stats = await locomo.remember_turns(ctx, [conv], show=False)
        assert stats["memories"] == len(conv.turns)
        for _ in range(2):
            via_bench = []
            for q in conv.questions:
                res = await ctx.engine.recall(
                    {
                        "query": q.text,
                        "project": ing.project,
                        "limit": locomo.RECALL_LIMIT,
                        "reference_time": conv.reference_time.isoformat(),
                    }
                )
                ranked = [c.memory.content for c in res.ranked[: locomo.RECALL_LIMIT]]
                assert [m.content for m, _ in res.memories] == ranked[: len(res.memories)]
                via_bench.append(ranked)
            assert via_bench == via_mcp


def test_locomo_reports_the_path_and_the_tool_path_reports_access_counting(
    synthetic_file, bench_settings, embedder
):
    tool = asyncio.run(locomo.run(bench_settings, synthetic_file, embedder=embedder, show_progress=False))
    assert tool["path"] == "tool" and "remember tool call per turn" in tool["config"]["path"]
    access = tool["access"]
    for key in ("counted", "not_counted", "asked_again"):
        _assert_recall_block(access[key])
    assert access["questions"] == tool["questions"]
    # A memory returned is not a memory used: counting accesses changes no answer.
    assert access["lists_changed_by_counting"] == 0
    assert access["lists_changed_when_asked_again"] == 0
    batch = asyncio.run(
        locomo.run(bench_settings, synthetic_file, path="batch", embedder=embedder, show_progress=False)
    )
    assert batch["path"] == "batch" and "access" not in batch
    with pytest.raises(ValueError, match="path must be one of"):
        asyncio.run(locomo.run(bench_settings, synthetic_file, path="nope", embedder=embedder))


def test_long_replies_keeps_every_turn_once_in_pieces_of_200_to_600_words():
    from memlane.bench.locomo_data import LONG_MAX_WORDS, LONG_MIN_WORDS, long_replies

    if not LOCOMO_30.exists():
        pytest.skip("../shared/locomo is not there")
    [conv] = load_conversations(LOCOMO_30)
    shaped = long_replies(conv)
    held = [d for t in shaped.turns for d in t.dia_ids]
    assert sorted(held) == sorted(t.dia_id for t in conv.turns)  # every turn once, none lost
    assert shaped.questions == conv.questions
    pieces = [t for t in shaped.turns if t.also]
    assert pieces, "no turn was merged"
    words = [len(t.content.split()) for t in pieces]
    # Only a session's last piece may fall short (its turns ran out); merging never passes the maximum.
    assert sum(w < LONG_MIN_WORDS for w in words) <= len({t.session for t in conv.turns})
    assert all(w <= LONG_MAX_WORDS for t, w in zip(pieces, words, strict=True))
    assert all(
        len({conv_t.session for conv_t in conv.turns if conv_t.dia_id in t.dia_ids}) == 1 for t in pieces
    )


def test_threshold_losses_count_evidence_stage_7_dropped_from_its_top_20():
    from types import SimpleNamespace
    from uuid import uuid4

    a, b, c, d = (uuid4() for _ in range(4))
    dias = {str(a): ["D1:1"], str(b): ["D1:2", "D1:3"], str(c): ["D1:4"], str(d): ["D1:5"]}
    kept = SimpleNamespace(memory=SimpleNamespace(id=a))
    result = SimpleNamespace(before_threshold=(a, b, c), ranked=[kept])
    before, lost = locomo.threshold_losses(result, dias, ("D1:1", "D1:3", "D1:5"))
    assert before == 2  # D1:5's memory was not among the candidates stage 7 was given
    assert lost == ["D1:3"]
