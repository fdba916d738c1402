"""``memlane bench updates``: the data's consistency, the scoring on rankings made by hand (so a
wrong metric fails here, not only in a figure), the supersessions read from the tools' results, and
a run of a few chains through an MCP client on the test's database."""

from __future__ import annotations

import copy
import json
from datetime import date

import psycopg
import pytest

from memlane.bench import report, updates
from memlane.bench.cli import UPDATES_OUT, parse
from memlane.server.cli import main as cli
from memlane.server.settings import load


@pytest.fixture(scope="module")
def chains() -> list[updates.Chain]:
    return updates.load_chains()


@pytest.fixture
def bench_settings(database_url, tmp_path):
    """Settings on this test's database, read as the CLI reads them (through load())."""
    return load(data_dir=tmp_path, database={"url": database_url})


def _by_id(chains, chain_id: str) -> updates.Chain:
    return next(c for c in chains if c.id == chain_id)


# -- the data -----------------------------------------------------------------------------------


def test_the_bundled_data_passes_its_own_checks(chains):
    assert updates.problems(chains) == []
    assert 60 <= len(chains) <= 100


def test_every_expected_id_is_a_statement_of_its_chain(chains):
    for c in chains:
        ids = {s.id for s in c.statements}
        assert c.questions, c.id
        for q in c.questions:
            assert q.expect and set(q.expect) <= ids, q.id
        for s in c.statements:
            assert s.superseded_by is None or s.superseded_by in ids, s.id


def test_dated_chains_are_stored_by_date_but_for_the_out_of_order_statements(chains):
    for c in chains:
        dates = [s.occurred_at for s in c.statements]
        assert all(dates) or not any(dates), f"{c.id}: a chain is dated or undated"
        if not all(dates):
            assert not any(s.out_of_order for s in c.statements), c.id
            continue
        latest = None
        for s in c.statements:
            when = date.fromisoformat(s.occurred_at)
            if s.out_of_order:
                assert latest is not None and when < latest, f"{s.id}: stored late but not dated earlier"
            else:
                assert latest is None or when >= latest, f"{s.id}: dated before one stored ahead of it"
                latest = when


def test_the_expectations_follow_from_what_replaces_what(chains):
    for c in chains:
        current = [s for s in c.members if not s.superseded_by]
        if "additive" in c.tags:
            assert len(current) == len(c.members), f"{c.id}: additive news replaces nothing"
        else:
            assert len(current) == 1, c.id
        assert not any(s.superseded_by for s in c.statements if s.lookalike), c.id
        for q in c.questions:
            if q.kind == "current":
                assert q.expect == (c.newest.id,), q.id
            if q.kind == "lookalike":
                assert all(s.lookalike for s in c.statements if s.id in q.expect), q.id


def test_the_data_covers_every_kind_it_reports(chains):
    counts = {k: sum(k in c.kinds for c in chains) for k in updates.KINDS}
    for kind in ("additive", "contradiction", "out-of-order", "no-cue"):
        assert counts[kind] >= 5, kind
    for kind in ("dated", "undated", "2-step", "3-step", *updates.VOICES):
        assert counts[kind] >= 10, kind
    kinds = {q.kind for c in chains for q in c.questions}
    assert kinds == set(updates.QUESTION_KINDS)
    # Look-alikes share their chain's project: that is the interference measured.
    assert sum(s.lookalike for c in chains for s in c.statements) >= 60
    assert len({c.group for c in chains}) < len(chains)  # some chains share a project


def _raw(chains, chain_id: str) -> dict:
    """A chain as the file holds it, to break one thing at a time."""
    c = _by_id(chains, chain_id)
    return {
        "id": c.id,
        "voice": c.voice,
        "domain": c.domain,
        "tags": list(c.tags),
        "statements": [{k: v for k, v in vars(s).items() if v not in (None, False)} for s in c.statements],
        "questions": [{"kind": q.kind, "text": q.text, "expect": list(q.expect)} for q in c.questions],
    }


@pytest.mark.parametrize(
    ("chain_id", "breaks", "says"),
    [
        ("maya-home", lambda c: c["questions"][0].update(expect=["maya-home/nowhere"]), "newest"),
        ("maya-home", lambda c: c["statements"][2].update(occurred_at="2021-01-01"), "out_of_order"),
        ("maya-home", lambda c: c["statements"][1].update(superseded_by="maya-home/berlin"), "look-alike"),
        ("our-dogs", lambda c: c["statements"][0].update(superseded_by="our-dogs/pepper"), "additive"),
        ("acme-ci", lambda c: c["statements"][2].pop("out_of_order"), "mark it out_of_order"),
        (
            "maya-home",
            lambda c: (c["statements"][3].update(out_of_order=True), c["tags"].append("out-of-order")),
            "no statement stored before it is newer",
        ),
        ("kenji-home", lambda c: c["tags"].remove("out-of-order"), "disagree"),
        ("maya-job", lambda c: c["statements"][2].update(content=c["statements"][0]["content"]), "repeats"),
        ("me-city", lambda c: c["questions"].pop(), "has no question"),
        ("me-city", lambda c: c["statements"][0].update(occurred_at="2020-01-01"), "dated or undated"),
        ("maya-job", lambda c: c["questions"][1].update(kind="trivia"), "kind 'trivia'"),
    ],
)
def test_the_checks_catch_a_broken_chain(chains, chain_id, breaks, says):
    raw = copy.deepcopy(_raw(chains, chain_id))
    assert updates.problems(updates.parse({"chains": [raw]})) == []  # whole, it passes
    breaks(raw)
    found = updates.problems(updates.parse({"chains": [raw]}))
    assert any(says in p for p in found), found


def test_a_data_file_that_fails_its_checks_is_refused(tmp_path, chains):
    raw = _raw(chains, "maya-home")
    raw["statements"][3]["superseded_by"] = "maya-home/lisbon"  # the newest replaced by the oldest
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"chains": [raw]}), encoding="utf-8")
    with pytest.raises(ValueError, match="which is older"):
        updates.load_chains(path)


# -- scoring on rankings made by hand -----------------------------------------------------------


def _q(chain: updates.Chain, kind: str) -> updates.Question:
    return next(q for q in chain.questions if q.kind == kind)


def test_an_old_fact_first_is_a_miss_and_stale(chains):
    maya = _by_id(chains, "maya-home")
    current = _q(maya, "current")
    old_first = updates.score(maya, current, ["maya-home/lisbon", "maya-home/berlin", "maya-home/tom"])
    assert (old_first.hit, old_first.stale_above, old_first.rank) == (False, True, 2)
    new_first = updates.score(maya, current, ["maya-home/berlin", "maya-home/lisbon"])
    assert (new_first.hit, new_first.stale_above, new_first.rank) == (True, False, 1)
    # A look-alike above the newest is a miss but not stale; the newest missing with an old one
    # there is stale; neither there is neither.
    lookalike_first = updates.score(maya, current, ["maya-home/tom", "maya-home/berlin", "maya-home/porto"])
    assert (lookalike_first.hit, lookalike_first.stale_above) == (False, False)
    missing = updates.score(maya, current, ["maya-home/tom", "maya-home/porto"])
    assert (missing.hit, missing.stale_above, missing.rank) == (False, True, None)
    empty = updates.score(maya, current, [])
    assert (empty.hit, empty.stale_above) == (False, False)


def test_history_wants_every_expected_statement_in_the_first_three(chains):
    maya = _by_id(chains, "maya-home")
    before_berlin = _q(maya, "history")  # expects porto
    assert before_berlin.expect == ("maya-home/porto",)
    third = ["maya-home/berlin", "maya-home/tom", "maya-home/porto"]
    fourth = ["maya-home/berlin", "maya-home/tom", "maya-home/lisbon", "maya-home/porto"]
    assert updates.score(maya, before_berlin, third).hit is True
    assert updates.score(maya, before_berlin, fourth).hit is False
    assert updates.score(maya, before_berlin, fourth).stale_above is None  # judged on current only
    two = updates.Question("x#1", maya.id, "history", "?", ("maya-home/lisbon", "maya-home/porto"))
    assert updates.score(maya, two, ["maya-home/porto", "maya-home/berlin", "maya-home/lisbon"]).hit
    assert not updates.score(maya, two, ["maya-home/porto", "maya-home/berlin", "maya-home/tom"]).hit


def test_additive_chains_are_never_stale(chains):
    dogs = _by_id(chains, "our-dogs")
    scored = updates.score(dogs, _q(dogs, "current"), ["our-dogs/miso", "our-dogs/pepper"])
    assert (scored.hit, scored.stale_above) == (False, None)


def test_metrics_and_the_breakdown_count_what_they_say(chains):
    maya, dogs = _by_id(chains, "maya-home"), _by_id(chains, "our-dogs")
    scored = [
        updates.score(maya, maya.questions[0], ["maya-home/lisbon", "maya-home/berlin"]),  # miss, stale
        updates.score(maya, maya.questions[1], ["maya-home/berlin"]),  # hit, not stale
        updates.score(dogs, _q(dogs, "current"), ["our-dogs/pepper"]),  # hit, not judged for staleness
        updates.score(maya, _q(maya, "history"), ["maya-home/lisbon"]),  # porto absent: miss
        updates.score(maya, _q(maya, "lookalike"), ["maya-home/tom"]),  # hit
    ]
    m = updates.metrics(scored)
    assert m["current_hit_at_1"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["stale_above_rate"] == 0.5
    assert m["history_hit_at_3"] == 0.0 and m["lookalike_hit_at_1"] == 1.0
    assert m["questions"] == {"current": 3, "stale_judged": 2, "history": 1, "lookalike": 1}
    by = updates.breakdown([maya, dogs], scored)
    assert by["additive"]["current_hit_at_1"] == 1.0 and by["additive"]["stale_above_rate"] is None
    assert by["3-step"]["current_hit_at_1"] == 0.5 and by["3-step"]["chains"] == 1
    assert by["dated"]["chains"] == 2 and "undated" not in by


def test_supersessions_are_judged_against_the_data(chains):
    maya, dogs = _by_id(chains, "maya-home"), _by_id(chains, "our-dogs")
    marks = [
        updates.Mark(old="maya-home/lisbon", new="maya-home/porto", via="remember"),  # expected
        updates.Mark(old="maya-home/tom", new="maya-home/berlin", via="remember"),  # a look-alike
        updates.Mark(old="our-dogs/miso", new="our-dogs/pepper", via="recall"),  # additive news
        updates.Mark(old="maya-home/lisbon", new="maya-home/berlin", via="recall"),  # the same one again
    ]
    block = updates.supersession_block([maya, dogs], marks, key_seen=True)
    assert block["expected"] == 2  # lisbon and porto
    assert (block["supersessions"], block["correct"]) == (3, 1)
    assert block["false_supersessions"] == 2
    assert [f["id"] for f in block["false"]] == ["maya-home/tom", "our-dogs/miso"]
    assert block["missed_supersessions"] == 1 and block["missed"] == ["maya-home/porto"]
    assert block["pairs_reported"] == 2 and block["marked_in_recall"] == 2
    assert block["by_kind"]["additive"] == {"expected": 0, "marked": 1, "false": 1, "missed": 0}
    nothing = updates.supersession_block([maya, dogs], [], key_seen=False)
    assert (nothing["supersessions"], nothing["false_supersessions"], nothing["missed_supersessions"]) == (
        0,
        0,
        2,
    )


# -- through the tools --------------------------------------------------------------------------

SUBSET = ("maya-home", "our-dogs", "acme-ci")


class _Reporting:
    """A client whose remember results carry the chosen ``supersedes`` only, and whose recalled
    memories carry ``superseded_by`` only on a chosen one, whatever the server decided: the bench
    must read them through the results."""

    def __init__(self, client, supersedes: dict[str, list[str]], recalled_superseded: str):
        self.client, self.supersedes, self.recalled = client, supersedes, recalled_superseded
        self.ids: dict[str, str] = {}  # content -> memory id, as remember answered

    async def call_tool(self, tool, args):
        res = await self.client.call_tool(tool, args)
        data = dict(res.structured_content or {})
        if tool == "remember":
            self.ids[args["content"]] = data["id"]
            olds = self.supersedes.get(args["content"], [])
            data["supersedes"] = [{"id": self.ids[o][:8], "content": o, "date": None} for o in olds]
            data.pop("superseded_by", None)
        elif tool == "recall":
            plain = [{k: v for k, v in m.items() if k != "superseded_by"} for m in data.get("memories", [])]
            data["memories"] = [
                {**m, "superseded_by": "ffffffff"} if m["content"] == self.recalled else m for m in plain
            ]
        return res.model_copy(update={"structured_content": data})


@pytest.mark.anyio
async def test_supersessions_are_read_from_the_tools_results(chains, bench_settings, embedder):
    from memlane.bench.common import bench_engine

    subset = [_by_id(chains, c) for c in SUBSET]
    text = {s.id: s.content for c in subset for s in c.statements}
    reported = {
        text["maya-home/porto"]: [text["maya-home/lisbon"]],  # as expected
        text["maya-home/berlin"]: [text["maya-home/tom"]],  # a look-alike: false
        text["acme-ci/jenkins"]: [text["acme-ci/gha"]],  # an old note replacing the newer: false
    }
    async with bench_engine(bench_settings, embedder=embedder) as ctx:
        async with updates.tool_client(bench_settings, ctx) as real:
            client = _Reporting(real, reported, recalled_superseded=text["our-dogs/miso"])
            stored = await updates.store(client, ctx, subset, show=False)
            scored, ms, recall_marks = await updates.ask(client, subset, stored, show=False)
    assert stored.key_seen and stored.calls == len(text) and len(ms) == len(scored)
    assert {(m.old, m.new) for m in stored.marks} == {
        ("maya-home/lisbon", "maya-home/porto"),
        ("maya-home/tom", "maya-home/berlin"),
        ("acme-ci/gha", "acme-ci/jenkins"),
    }
    assert recall_marks and {m.old for m in recall_marks} == {"our-dogs/miso"}
    block = updates.supersession_block(subset, stored.marks + recall_marks, stored.key_seen)
    assert [f["id"] for f in block["false"]] == ["acme-ci/gha", "maya-home/tom", "our-dogs/miso"]
    assert block["correct"] == 1 and block["missed_supersessions"] == block["expected"] - 1
    # Every recalled memory maps back to a statement of the subset.
    assert all(sid in text for s in scored for sid in s.ranked)


@pytest.mark.anyio
async def test_locomo_supersessions_are_counted_and_sampled_as_text_pairs(bench_settings, embedder, tmp_path):
    """A conversation in the LoCoMo layout (its own words, not LoCoMo's) through the LoCoMo part,
    with a client that reports one supersession."""
    from memlane.bench.common import bench_engine

    def turn(session: int, i: int, speaker: str, text: str) -> dict:
        return {"speaker": speaker, "dia_id": f"D{session}:{i}", "text": text}

    conversation = {
        "speaker_a": "Ida",
        "speaker_b": "Oskar",
        "session_1_date_time": "10:00 am on 3 March, 2024",
        "session_1": [
            turn(1, 1, "Ida", "I teach maths at a school in Bergen."),
            turn(1, 2, "Oskar", "Nice!"),
        ],
        "session_2_date_time": "9:00 am on 9 September, 2024",
        "session_2": [turn(2, 1, "Ida", "I left teaching and now build boats in Stavanger.")],
        "qa": [],
    }
    path = tmp_path / "locomo" / "77.json"
    path.parent.mkdir()
    path.write_text(json.dumps(conversation), encoding="utf-8")
    old, new = (
        "Ida: I teach maths at a school in Bergen.",
        "Ida: I left teaching and now build boats in Stavanger.",
    )
    async with bench_engine(bench_settings, embedder=embedder) as ctx:
        async with updates.tool_client(bench_settings, ctx) as real:
            client = _Reporting(real, {new: [old]}, recalled_superseded="")
            block = await updates.locomo_supersessions(client, ctx, path.parent, show=False)
    assert (block["conversations"], block["turns"], block["supersessions"]) == (1, 3, 1)
    assert block["supersedes_key_seen"] is True
    assert block["turns_superseding"] == 1 and block["source"] == "locomo"
    [pair] = block["sample"]
    assert (pair["new"], pair["old"], pair["new_dia_id"], pair["conversation"]) == (new, old, "D2:1", "77")


def test_a_run_of_three_chains_reports_what_its_questions_scored(
    chains, bench_settings, embedder, database_url, tmp_path
):
    import asyncio

    subset = [_by_id(chains, c) for c in SUBSET]
    r = asyncio.run(
        updates.run(
            bench_settings, chains=subset, locomo=tmp_path / "nowhere", embedder=embedder, show_progress=False
        )
    )
    assert r["benchmark"] == "updates"
    assert r["data"]["chains"] == 3 and r["data"]["projects"] == 3
    assert r["remember"]["calls"] == r["data"]["statements"] == sum(len(c.statements) for c in subset)
    rows = r["questions"]
    assert len(rows) == sum(len(c.questions) for c in subset)
    # The headline figures are what the per-question rows say, recomputed here.
    current = [q for q in rows if q["kind"] == "current"]
    assert r["metrics"]["current_hit_at_1"] == round(sum(q["hit"] for q in current) / len(current), 4)
    for q in current:
        assert q["hit"] == (q["top"][:1] == q["expect"])
    judged = [q["stale_above"] for q in current if q["stale_above"] is not None]
    assert len(judged) == 3  # maya-home's two and acme-ci's one; the dogs replace nothing
    assert r["metrics"]["stale_above_rate"] == round(sum(judged) / len(judged), 4)
    for q in (q for q in rows if q["kind"] == "history"):
        assert q["hit"] == (set(q["expect"]) <= set(q["top"]))
    sup = r["supersessions"]
    assert sup["expected"] == 4  # lisbon, porto; jenkins, circle
    assert sup["correct"] + sup["false_supersessions"] == sup["supersessions"]
    assert sup["missed_supersessions"] == sup["expected"] - sup["correct"]
    assert set(r["by_kind"]) >= {"dated", "3-step", "additive", "out-of-order"}
    assert r["locomo"]["status"] == "skipped: no LoCoMo data at nowhere"
    assert r["config"]["recall_limit"] == updates.RECALL_LIMIT and r["versions"]["postgresql"]
    json.dumps(r)
    text = report.render(r)
    assert "## Update chains: 3 chains" in text and "| out-of-order | 1 |" in text
    with psycopg.connect(database_url) as conn:  # the run's projects are gone
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0


# -- the command line ---------------------------------------------------------------------------


def test_updates_is_a_bench_command_with_its_defaults():
    import argparse

    args = parse(["updates"], argparse.Namespace())
    assert args.bench_run.__name__ == "_updates"
    assert args.json == UPDATES_OUT == "bench/results/updates.json"
    assert not args.locomo_supersessions and args.locomo is None and args.data is None
    args = parse(["updates", "--out", "x.json", "--locomo", "somewhere"], argparse.Namespace())
    assert (args.json, args.locomo) == ("x.json", "somewhere")


def test_a_missing_data_file_stops_before_any_store(tmp_path, capsys):
    assert cli.main(["bench", "updates", "--data", str(tmp_path / "none.json"), "--quiet"]) == 2
    assert "no such file" in capsys.readouterr().err
