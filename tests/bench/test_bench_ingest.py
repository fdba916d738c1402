"""``memlane bench locomo --ingest`` (what ingest keeps of a LoCoMo-format conversation, scored on
evidence turns) and ``memlane bench maintain`` (purge and merge on a store with planted work)."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest

from memlane.bench import locomo, maintainbench
from memlane.server.settings import load

IGUANA = "My pet iguana Ziggy learned to climb the bookshelf."


def _turn(session: int, i: int, speaker: str, text: str) -> dict:
    return {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text}


def conversation() -> dict:
    return {
        "speaker_a": "Alice",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn(1, 1, "Alice", "ok!"),
            _turn(1, 2, "Bob", IGUANA),
            _turn(1, 3, "Alice", "thanks"),
            _turn(1, 4, "Bob", "I started volunteering at the animal shelter on Saturdays."),
        ],
        "session_2_date_time": "10:04 am on 20 June, 2023",
        "session_2": [
            _turn(2, 1, "Bob", IGUANA.replace(".", "!")),  # a near-duplicate of D1:2
            _turn(2, 2, "Alice", "I am moving to Lisbon in September for a new job."),
        ],
        "qa": [
            {"question": "What is the name of Bob's pet iguana?", "evidence": ["D2:1"], "category": 4},
            {"question": "What did Alice say first?", "evidence": ["D1:1"], "category": 4},
            {"question": "Where is Alice moving?", "evidence": ["D2:2"], "category": 2},
            {"question": "Where does Bob volunteer?", "evidence": ["D1:4"], "category": 1},
        ],
    }


@pytest.fixture
def bench_settings(database_url, tmp_path):
    return load(data_dir=tmp_path, database={"url": database_url})


def test_locomo_ingest_variant_counts_what_ingest_kept_and_scores_lost_evidence_as_misses(
    tmp_path, bench_settings, embedder, database_url
):
    path = tmp_path / "locomo" / "77.json"
    path.parent.mkdir()
    path.write_text(json.dumps(conversation()), encoding="utf-8")
    report = asyncio.run(
        locomo.run(bench_settings, path.parent, ingest_variant=True, embedder=embedder, show_progress=False)
    )
    ing = report["ingest"]
    assert (ing["turns"], ing["pieces"], ing["stored"], ing["duplicate"], ing["filtered"]) == (6, 6, 3, 1, 2)
    assert ing["filtered_by"] == {"exclude_pattern": 2}
    assert ing["sessions_split_differently"] == 0
    assert (ing["evidence_turns"], ing["evidence_turns_lost"], ing["evidence_turns_deduplicated"]) == (
        4,
        1,
        1,
    )
    assert ing["lost_examples"] == ["77:D1:1"]
    by_cat = ing["recall"]["by_category"]["4"]
    # The iguana question's evidence (D2:1) was deduplicated into D1:2's memory, which still counts;
    # the filtered "ok!" can never be found: half of category 4 at best.
    assert by_cat["20"] == 0.5
    assert ing["recall"]["by_category"]["2"]["5"] == 1.0
    assert ing["explicit_remember_recall"] == report["recall"]
    assert report["recall"]["by_category"]["4"]["20"] == 1.0  # explicit remember keeps every turn
    json.dumps(report)
    with psycopg.connect(database_url) as conn:  # both runs' projects are gone
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_maintain_bench_purges_and_merges_what_was_planted(bench_settings, embedder, database_url):
    report = asyncio.run(
        maintainbench.run(bench_settings, 60, every=10, embedder=embedder, show_progress=False)
    )
    store = report["store"]
    assert (store["stored"], store["planted_near_duplicates"], store["planted_expired"]) == (66, 6, 6)
    runs = report["runs"]
    assert runs["dry_run"]["tasks"]["purge"]["would_purge"] == 6
    assert runs["run"]["tasks"]["purge"]["purged"] == 6
    assert runs["dry_run"]["tasks"]["merge"]["would_merge"] == runs["run"]["tasks"]["merge"]["merged"]
    assert report["merge"]["planted_pairs_merged"] >= 4  # a few planted pairs may sit under 0.97
    assert runs["second_run"]["tasks"]["purge"]["purged"] == 0
    assert runs["second_run"]["tasks"]["merge"]["merged"] == 0
    assert report["memories_after"] == 66 - 6 - report["merge"]["merged"]
    assert "| run | seconds |" in maintainbench.markdown(report)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
