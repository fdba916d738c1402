"""``memlane bench labels``: automatic category names scored against hand-written labels
(bench/labelsbench.py, bench/data/category_labels.json)."""

from __future__ import annotations

import asyncio
import json

import pytest

from memlane.bench import labelsbench, report
from memlane.pipeline.errors import ConfigError
from memlane.server.cli import main as cli
from memlane.server.settings import load


def test_a_label_matches_an_accepted_one_or_its_head_noun():
    accepted = ["kitchen renovation", "renovation", "kitchen"]
    assert labelsbench.matches("Kitchen Renovation", accepted)
    assert labelsbench.matches("renovation budget", ["budget"])  # same head noun
    assert labelsbench.matches("deploys", ["deploy"])  # singular and plural
    assert not labelsbench.matches("renovation contractor", accepted)
    assert not labelsbench.matches("ran marathon", ["running", "marathon training"])
    assert not labelsbench.matches(None, accepted) and not labelsbench.matches("", accepted)


def test_the_bundled_set_is_well_formed_and_a_bad_file_says_what_is_expected(tmp_path):
    clusters = labelsbench.load()
    assert 10 <= len(clusters) <= 15 and 40 <= sum(len(c["memories"]) for c in clusters) <= 60
    assert all(1 <= len(c["labels"]) <= 3 for c in clusters)
    assert len({c["project"] for c in clusters}) > 3  # memories of several projects
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"clusters": [{"id": "x", "labels": [], "memories": ["a"]}]}))
    with pytest.raises(ConfigError, match="cluster 1 must be"):
        labelsbench.load(bad)


def test_the_report_scores_both_namers_on_the_set(tmp_path, embedder):
    settings = load(None, data_dir=tmp_path)
    got = asyncio.run(labelsbench.run(settings, embedder=embedder))
    clusters = labelsbench.load()
    assert got["benchmark"] == "labels" and got["clusters"] == len(clusters)
    before, now = got["methods"]["pairs"], got["methods"]["phrases"]
    # The founder's figure is the share of clusters whose first memory's name matches, per namer.
    for method, namer in labelsbench.METHODS.items():
        hits = sum(labelsbench.matches(namer(c["memories"][0]), c["labels"]) for c in clusters)
        assert got["methods"][method]["founder"] == round(hits / len(clusters), 4)
    assert now["founder"] > before["founder"] and now["assigned"] > before["assigned"]
    assert {c["id"]: c["pairs_founder"] for c in got["per_cluster"]}[
        "running"
    ] == "ran marathon"  # the issue's
    assert "| noun phrases (now) |" in report.render(got)


def test_memlane_bench_labels_writes_its_report(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEMLANE_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "labels.json"
    data = tmp_path / "set.json"
    data.write_text(
        json.dumps(
            {
                "clusters": [
                    {
                        "id": "trip",
                        "project": "p",
                        "labels": ["trip"],
                        "memories": ["The Japan trip is booked for April.", "The trip starts in Tokyo."],
                    }
                ]
            }
        )
    )
    assert cli.main(["bench", "labels", "--data", str(data), "--json", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["methods"]["phrases"]["founder"] == 1.0 and written["methods"]["pairs"]["founder"] == 0.0
    assert "japan trip" in capsys.readouterr().out
    assert cli.main(["bench", "labels", "--data", str(tmp_path / "missing.json")]) == 2
