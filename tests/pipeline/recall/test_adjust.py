"""Stage 8, the scoring adjustments: each factor orders memories as specified, on the real pipeline
(embedded PostgreSQL, the session's embedding model), and recall across projects."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from support.clients import call_error, call_ok
from support.llm_fakes import ScriptedLLM, failing
from support.records import make_memory

from memlane.pipeline.config import (
    AdjustConfig,
    DecayConfig,
    EngineConfig,
    RecallConfig,
    TopicsConfig,
)
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall import adjust
from memlane.pipeline.recall.query import Ablation, RecallQuery
from memlane.pipeline.records import Candidate
from memlane.pipeline.remember.inputs import MemoryPatch

pytestmark = pytest.mark.anyio

REF = datetime(2025, 6, 1, tzinfo=UTC)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _inputs(**kw) -> adjust.Inputs:
    return adjust.Inputs(reference_time=REF, now=NOW, **kw)


# -- the factors, one by one (pure) ------------------------------------------------------------------


def test_decay_halves_the_decaying_share_per_half_life_and_spares_pinned_and_future_memories():
    cfg = DecayConfig(enabled=True, half_life_days=30, share=0.4)
    month_old = make_memory("a", occurred_at=REF - timedelta(days=30))
    assert adjust.decay_factor(month_old, cfg, REF) == pytest.approx(1 - 0.4 + 0.4 * 0.5)
    two_months = make_memory("a", occurred_at=REF - timedelta(days=60))
    assert adjust.decay_factor(two_months, cfg, REF) == pytest.approx(1 - 0.4 + 0.4 * 0.25)
    ancient = make_memory("a", occurred_at=REF - timedelta(days=3650))
    assert adjust.decay_factor(ancient, cfg, REF) == pytest.approx(0.6, abs=1e-6)  # never below 1 - share
    pinned = make_memory("a", occurred_at=REF - timedelta(days=365), pinned=True)
    assert adjust.decay_factor(pinned, cfg, REF) == 1.0
    future = make_memory("a", occurred_at=REF + timedelta(days=10))
    assert adjust.decay_factor(future, cfg, REF) == 1.0
    # occurred_at wins over created_at; without it, created_at counts.
    stored_late = make_memory("a", occurred_at=REF, created_at=REF - timedelta(days=300))
    assert adjust.decay_factor(stored_late, cfg, REF) == 1.0
    undated = make_memory("a", created_at=REF - timedelta(days=30))
    assert adjust.decay_factor(undated, cfg, REF) == pytest.approx(0.8)


def test_decay_uses_the_half_life_of_the_memorys_category():
    cfg = DecayConfig(enabled=True, half_life_days=30, share=1.0, category_half_life_days={"preference": 360})
    old = REF - timedelta(days=360)
    assert adjust.decay_factor(
        make_memory("a", occurred_at=old, category="preference"), cfg, REF
    ) == pytest.approx(0.5)
    assert adjust.decay_factor(
        make_memory("a", occurred_at=old, category="incident"), cfg, REF
    ) == pytest.approx(0.5**12)


def test_hot_is_priority_and_recent_use_not_how_often_recall_returned_a_memory():
    cfg = AdjustConfig()
    low, default, high = (make_memory("a", priority=p) for p in (1, 3, 5))
    assert adjust.hotness(low, cfg, None, NOW) == 0.0
    assert adjust.hotness(default, cfg, None, NOW) < adjust.hotness(high, cfg, None, NOW)
    # Returned by recall 10,000 times, just now: not used, not hotter.
    assert adjust.hotness(default, cfg, (10_000, NOW), NOW) == adjust.hotness(default, cfg, None, NOW)
    # Updated an hour ago (the client acted on it): hotter; the part halves per access_half_life_days.
    made = NOW - timedelta(days=30)
    updated = make_memory("a", created_at=made, updated_at=NOW - timedelta(hours=1))
    week_ago = make_memory("a", created_at=made, updated_at=NOW - timedelta(days=7))
    never = make_memory("a", created_at=made)
    assert adjust.hotness(never, cfg, None, NOW) == pytest.approx(0.25)
    assert adjust.hotness(updated, cfg, None, NOW) == pytest.approx(0.25 + 0.5, abs=0.01)
    assert adjust.hotness(week_ago, cfg, None, NOW) == pytest.approx(0.25 + 0.25)
    hottest = adjust.factors_of(
        make_memory("a", priority=5, created_at=made, updated_at=NOW),
        DecayConfig(),
        cfg,
        _inputs(),
        ("priority",),
    )
    assert hottest["priority"] == pytest.approx(2.0)


def test_with_access_boost_the_boost_grows_with_priority_frequency_and_recency_and_stays_within_2x():
    cfg = AdjustConfig(access_boost=True)
    low, default, high = (make_memory("a", priority=p) for p in (1, 3, 5))
    assert adjust.hotness(low, cfg, None, NOW) == 0.0
    assert adjust.hotness(default, cfg, None, NOW) < adjust.hotness(high, cfg, None, NOW)
    often = adjust.hotness(default, cfg, (10, NOW - timedelta(days=30)), NOW)
    once = adjust.hotness(default, cfg, (1, NOW - timedelta(days=30)), NOW)
    assert once < often
    recent = adjust.hotness(default, cfg, (1, NOW - timedelta(hours=1)), NOW)
    assert once < recent
    hottest = adjust.factors_of(
        high, DecayConfig(), cfg, _inputs(access={high.id: (10_000, NOW)}), ("priority",)
    )
    assert 1.99 < hottest["priority"] <= 2.0
    capped = adjust.factors_of(
        high,
        DecayConfig(),
        AdjustConfig(max_priority_boost=1.5, access_boost=True),
        _inputs(access={high.id: (10_000, NOW)}),
        ("priority",),
    )
    assert capped["priority"] <= 1.5
    with pytest.raises(ValueError):
        AdjustConfig(max_priority_boost=2.5)  # bounded at 2x


def test_an_llm_reranked_order_survives_when_the_factors_agree():
    """The rerank stage reorders without scores; stage 8 keeps that order unless a factor says otherwise."""
    a, b, c = (make_memory(x) for x in "abc")
    reranked = [Candidate(b, 0.5), Candidate(c, 0.4), Candidate(a, 0.9)]  # not in score order
    out = adjust.rescore(reranked, DecayConfig(), AdjustConfig(), _inputs(), ("priority",))
    assert [x.memory.content for x in out] == ["b", "c", "a"]
    assert [x.base_score for x in out] == [0.9, 0.5, 0.4]


def test_recall_decay_switch_accepts_a_boolean_or_the_table():
    assert RecallConfig(decay=True).decay.enabled is True
    assert RecallConfig(decay="false").decay.enabled is False
    assert RecallConfig(decay={"enabled": True, "share": 0.5}).decay.share == 0.5
    with pytest.raises(ValueError):
        RecallConfig(decay={"share": 1.5})
    with pytest.raises(ValueError):
        RecallConfig(decay={"category_half_life_days": {"x": 0}})


# -- on the real pipeline ----------------------------------------------------------------------------


def _config(engine_config: EngineConfig, **recall) -> EngineConfig:
    """The factors on their own: no automatic topics (a memory's first topic would become its
    category, and the category factor would then tell the twins apart), the LLM category match on.
    The graph arm stays on: each twin reaches the other with the same activation, so it adds the
    same to both."""
    merged = {**engine_config.recall.model_dump(), **recall}
    llm = engine_config.llm.model_copy(deep=True)
    llm.stages.category_match.enabled = True
    return engine_config.model_copy(
        update={
            "recall": RecallConfig.model_validate(merged),
            "topics": TopicsConfig(enabled=False),
            "llm": llm,
        }
    )


@pytest.fixture
def make_engine(engine_config, open_engine):
    async def _make(llm=None, **recall) -> Engine:
        return await open_engine(_config(engine_config, **recall), llm)

    return _make


async def _ranked(eng: Engine, query: str, **kw) -> list[Candidate]:
    req = RecallQuery.parse(
        eng.config, dict(query=query, explain=True, reference_time=kw.pop("reference_time", REF), **kw)
    )
    res = await eng.recall(req.model_copy(update={"count_accesses": False}))
    return res.ranked


async def _twins(eng: Engine, content: str, first: dict, second: dict, project: str = "p"):
    """The same content twice (on two days, so both are stored): equal fused scores. ``stable_key``
    puts the earlier day first when scores tie, so the later one must win on its factor alone."""
    out = []
    for day, fields in ((1, first), (2, second)):
        item = {"content": content, "project": project, "occurred_at": f"2025-05-0{day}", **fields}
        out.append((await eng.remember(item)).id)
    return out


async def test_equal_scores_pinned_first(make_engine):
    eng = await make_engine()
    plain, pinned = await _twins(eng, "The deploy key lives in the ops vault", {}, {"pinned": True})
    ranked = await _ranked(eng, "where is the deploy key?", project="p")
    assert [c.memory.id for c in ranked[:2]] == [pinned, plain]
    assert ranked[0].adjustments["pinned"] == pytest.approx(1.1)
    assert "pinned" not in ranked[1].adjustments
    assert ranked[0].score == pytest.approx(ranked[1].score * 1.1)
    # Without stage 8 the tie breaks the other way: the factor made the difference.
    req = RecallQuery.parse(
        eng.config, dict(query="where is the deploy key?", project="p", reference_time=REF)
    )
    bare = await eng.recall(
        req.model_copy(update={"count_accesses": False, "ablation": Ablation(adjustments=False)})
    )
    assert [c.memory.id for c in bare.ranked[:2]] == [plain, pinned]


async def test_equal_scores_priority_5_before_priority_1(make_engine):
    eng = await make_engine()
    low, high = await _twins(eng, "Backups run at 3am from the replica", {"priority": 1}, {"priority": 5})
    ranked = await _ranked(eng, "when do backups run?", project="p")
    assert [c.memory.id for c in ranked[:2]] == [high, low]
    assert ranked[0].adjustments["priority"] > ranked[1].adjustments["priority"]


async def test_a_memory_recall_returned_often_is_not_boosted_and_answers_do_not_drift(make_engine):
    """By default a memory returned is not a memory used: recalls that count accesses leave the next
    recall's order and scores as they were."""
    eng = await make_engine()
    first, second = await _twins(eng, "The VPN config is in the team wiki", {}, {})
    before = await _ranked(eng, "where is the VPN config?", project="p")
    for _ in range(5):
        await eng.store.count_accesses([second])
    req = RecallQuery.parse(
        eng.config, dict(query="where is the VPN config?", project="p", reference_time=REF)
    )
    for _ in range(3):  # recalls that count their accesses, as the recall tool does
        await eng.recall(req.model_copy(update={"count_accesses": True}))
    after = await _ranked(eng, "where is the VPN config?", project="p")
    assert [(c.memory.id, c.score) for c in after] == [(c.memory.id, c.score) for c in before]
    assert [c.memory.id for c in after[:2]] == [first, second]


async def test_equal_scores_the_memory_the_client_updated_comes_first(make_engine):
    eng = await make_engine()
    kept, updated = await _twins(eng, "The VPN config is in the team wiki", {}, {})
    assert [c.memory.id for c in (await _ranked(eng, "where is the VPN config?", project="p"))[:2]] == [
        kept,
        updated,
    ]
    await asyncio.sleep(1.1)  # an update is a use when it comes after the write (adjust.USED_AFTER_S)
    patch = MemoryPatch.parse(eng.config, {"tags": ["network"]})
    await eng.update(updated, patch)
    ranked = await _ranked(eng, "where is the VPN config?", project="p")
    assert [c.memory.id for c in ranked[:2]] == [updated, kept]
    assert ranked[0].adjustments["priority"] > ranked[1].adjustments["priority"]


async def test_with_access_boost_a_memory_recalled_often_and_lately_comes_first(make_engine, monkeypatch):
    eng = await make_engine(adjust={**AdjustConfig().model_dump(), "access_boost": True})
    cold, hot = await _twins(eng, "The VPN config is in the team wiki", {}, {})
    for _ in range(5):
        await eng.store.count_accesses([hot])
    # The arms read the access statistics with the memories: stage 8 has nothing left to read.
    reads = []
    real = eng.store.access_stats

    async def counted(ids):
        reads.append(list(ids))
        return await real(ids)

    monkeypatch.setattr(eng.store, "access_stats", counted)
    ranked = await _ranked(eng, "where is the VPN config?", project="p")
    assert [c.memory.id for c in ranked[:2]] == [hot, cold]
    assert ranked[0].adjustments["priority"] > ranked[1].adjustments["priority"] == pytest.approx(1.25)
    assert ranked[0].memory.access_known and ranked[0].memory.access_count == 5
    assert reads == []


async def test_stage_8_reads_the_access_statistics_of_memories_read_without_them(make_engine):
    """A memory that reached stage 8 without its access statistics (an arm that does not join
    them) has them read, not taken as zero."""
    from dataclasses import replace as dc_replace

    from memlane.pipeline.recall.adjust import _access_stats
    from memlane.pipeline.recall.context import ReadAheads
    from memlane.pipeline.records import Candidate

    eng = await make_engine()
    cold, hot = await _twins(eng, "The VPN config is in the team wiki", {}, {})
    for _ in range(3):
        await eng.store.count_accesses([hot])
    bare = [
        dc_replace(await eng.store.get(m), access_count=0, last_accessed_at=None, access_known=False)
        for m in (hot, cold)
    ]

    class Ctx:
        store = eng.store
        reads = ReadAheads()

    stats = await _access_stats(Ctx, [Candidate(memory=m) for m in bare])
    assert stats[hot][0] == 3 and cold not in stats


async def test_an_old_exact_match_beats_a_fresh_vague_one_because_only_a_share_decays(make_engine):
    exact = {"content": "The billing service stores invoices in PostgreSQL", "occurred_at": "2023-01-10"}
    vague = {"content": "Someone from billing asked about a service yesterday", "occurred_at": "2025-05-31"}
    query = "which database does the billing service store invoices in?"
    eng = await make_engine(decay={"enabled": True, "half_life_days": 30, "share": 0.2})
    for item in (exact, vague):
        await eng.remember({**item, "project": "p"})
    ranked = await _ranked(eng, query, project="p")
    assert ranked[0].memory.content == exact["content"]
    assert ranked[0].adjustments["decay"] == pytest.approx(0.8, abs=1e-3)  # 2.4 years: fully decayed share
    assert ranked[1].adjustments["decay"] > 0.97
    # With the whole score decaying, the fresh vague memory would win: the bound is what keeps it.
    eng_full = await make_engine(decay={"enabled": True, "half_life_days": 30, "share": 1.0})
    ranked = await _ranked(eng_full, query, project="p")
    assert ranked[0].memory.content == vague["content"]


async def test_decay_is_off_by_default_and_recall_decay_false_switches_it_off(make_engine):
    eng = await make_engine()
    await eng.remember(
        {"content": "Old note about the release train", "occurred_at": "2020-01-01", "project": "p"}
    )
    ranked = await _ranked(eng, "release train", project="p")
    assert "decay" not in ranked[0].adjustments
    eng = await make_engine(decay=False)
    assert "decay" not in (await _ranked(eng, "release train", project="p"))[0].adjustments
    eng = await make_engine(decay=True)
    assert ranked and (await _ranked(eng, "release train", project="p"))[0].adjustments["decay"] < 1.0


async def test_category_matching_the_question_is_boosted_offline_by_its_centroid(make_engine):
    eng = await make_engine()
    infra = [
        "The primary database runs PostgreSQL 16 on two hosts",
        "Database backups are streamed to object storage",
        "The connection pooler sits in front of the database",
    ]
    cooking = [
        "Grandma's lasagna needs three layers",
        "Bake the bread at 220 degrees",
        "Risotto wants patience",
    ]
    for text in infra:
        await eng.remember({"content": text, "project": "p", "category": "infrastructure"})
    for text in cooking:
        await eng.remember({"content": text, "project": "p", "category": "recipes"})
    a, b = await _twins(
        eng,
        "We decided to keep the schema migrations small",
        {"category": "recipes"},
        {"category": "infrastructure"},
    )
    ranked = await _ranked(eng, "what did we decide about database schema migrations?", project="p")
    order = [c.memory.id for c in ranked]
    assert order.index(b) < order.index(a)
    by_id = {c.memory.id: c for c in ranked}
    assert by_id[b].adjustments["category"] > by_id[a].adjustments["category"] >= 1.0


async def test_the_offline_category_match_is_read_once_before_stage_5(make_engine, monkeypatch):
    """Recall starts the centroids' read of every retrieved category right after retrieval, so stage
    8 waits for no round trip of its own; the boost is the one it would compute itself."""
    from memlane.pipeline.recall import fuse

    eng = await make_engine()
    for i, (text, category) in enumerate(
        [
            ("The primary database runs PostgreSQL 16 on two hosts", "infrastructure"),
            ("Database backups are streamed to object storage", "infrastructure"),
            ("Grandma's lasagna needs three layers", "recipes"),
            ("Bake the bread at 220 degrees", "recipes"),
        ]
    ):
        await eng.remember({"content": text, "project": "p", "category": category, "position": i})
    events: list = []
    read = eng.store.category_centroids
    fusion = fuse.fuse

    async def centroids(pairs, **kw):
        events.append(("centroids", sorted(pairs)))
        return await read(pairs, **kw)

    def fused(ctx, found):
        events.append(("fusion", None))
        return fusion(ctx, found)

    monkeypatch.setattr(eng.store, "category_centroids", centroids)
    monkeypatch.setattr(fuse, "fuse", fused)
    question = "how are the database backups stored?"
    ranked = await _ranked(eng, question, project="p")
    assert [e for e, _ in events] == ["centroids", "fusion"]
    assert set(events[0][1]) >= {(c.memory.project, c.memory.category) for c in ranked}
    early = {c.memory.id: c.adjustments["category"] for c in ranked}
    monkeypatch.setattr(adjust, "reads_centroids", lambda ctx, active: False)  # stage 8 reads them itself
    events.clear()
    alone = {c.memory.id: c.adjustments["category"] for c in await _ranked(eng, question, project="p")}
    assert [e for e, _ in events] == ["fusion", "centroids"]
    assert alone == early and max(early.values()) > 1.0


async def test_a_recall_takes_cached_centroids_by_the_versions_its_rows_carry(make_engine, monkeypatch):
    """Retrieval reads each candidate's category version with its row: a recall whose categories
    are cached at those versions sends no centroid statement, and a write to one category makes
    the next recall read that category again, and only it, with the boost a cold cache gives."""
    from memlane.pipeline.store import scoring

    eng = await make_engine()
    await eng.remember_many(
        [
            {"content": text, "project": "p", "category": category}
            for text, category in [
                ("The primary database runs PostgreSQL 16 on two hosts", "infrastructure"),
                ("Database backups are streamed to object storage", "infrastructure"),
                ("Grandma's lasagna needs three layers", "recipes"),
                ("Bake the bread at 220 degrees", "recipes"),
            ]
        ]
    )
    reads: list[list[tuple[str, str]]] = []
    real = scoring.ScoringQueries._read_centroids

    async def counted(self, pairs, now, have=None):
        reads.append(sorted(pairs))
        return await real(self, pairs, now, have)

    monkeypatch.setattr(scoring.ScoringQueries, "_read_centroids", counted)
    question = "how are the database backups stored?"
    await _ranked(eng, question, project="p")
    await asyncio.gather(*eng.store.__dict__.get("_filling", {}).values())
    reads.clear()
    warm = {c.memory.id: c.adjustments["category"] for c in await _ranked(eng, question, project="p")}
    assert reads == [] and max(warm.values()) > 1.0
    await eng.remember(
        {"content": "Restores are tested every quarter", "project": "p", "category": "recipes"}
    )
    after = {c.memory.id: c.adjustments["category"] for c in await _ranked(eng, question, project="p")}
    assert reads == [[("p", "recipes")]]
    eng.store.__dict__.pop("_centroids")
    cold = {c.memory.id: c.adjustments["category"] for c in await _ranked(eng, question, project="p")}
    assert cold == after


async def test_category_match_asks_the_llm_when_one_is_configured_and_falls_back_offline(make_engine):
    llm = ScriptedLLM().enqueue("category_match", '{"alpha": 0.0, "beta": 1.0}', failing("HTTP 503"))
    eng = await make_engine(llm=llm)
    a, b = await _twins(
        eng, "The on-call rotation changes on Mondays", {"category": "beta"}, {"category": "alpha"}
    )
    req = RecallQuery.parse(
        eng.config,
        dict(query="when does the on-call rotation change?", project="p", reference_time=REF, mode="fast"),
    )
    res = await eng.recall(req.model_copy(update={"count_accesses": False}))
    assert [c.memory.id for c in res.ranked[:2]] == [a, b]  # beta rated 1.0 by the model
    assert res.ranked[0].adjustments["category"] == pytest.approx(1.2)
    [call] = llm.calls_for("category_match")
    assert "<question>" in call["user"] and 'name="alpha"' in call["user"] and 'name="beta"' in call["user"]
    stage = next(s for s in res.trace.stages if s.stage == "adjustments")
    assert stage.detail["category"]["implementation"] == "llm"
    assert stage.detail["prompt"].startswith("category_match@v1")
    # The provider fails: the offline centroid match stands in, and the trace says so.
    res = await eng.recall(
        dict(query="who is on call on Mondays?", project="p", mode="fast", count_accesses=False)
    )
    stage = next(s for s in res.trace.stages if s.stage == "adjustments")
    assert stage.status.startswith("degraded: category_match LLM failed")
    assert stage.detail["category"]["implementation"].startswith("offline")
    assert len(res.ranked) >= 2


async def test_a_recall_with_one_project_stays_isolated_and_has_no_project_factor(make_engine):
    eng = await make_engine()
    await eng.remember({"content": "The staging cluster is in Frankfurt", "project": "a"})
    await eng.remember({"content": "The staging cluster is in Oregon", "project": "b"})
    for project in ("a", ["a"]):
        ranked = await _ranked(eng, "where is the staging cluster?", project=project)
        assert {c.memory.project for c in ranked} == {"a"}
        assert all("project" not in c.adjustments for c in ranked)


async def test_a_recall_across_projects_boosts_the_current_project(make_engine):
    eng = await make_engine()
    content = "The staging cluster is in Frankfurt"
    for project in ("alpha", "beta", "gamma"):
        await eng.remember({"content": content, "project": project})
    for current in ("alpha", "beta", "gamma"):
        ranked = await _ranked(
            eng, "where is the staging cluster?", project=["alpha", "beta", "gamma"], current_project=current
        )
        assert ranked[0].memory.project == current
        assert ranked[0].adjustments["project"] == pytest.approx(1.3)
        assert {c.memory.project for c in ranked} == {"alpha", "beta", "gamma"}
        assert all(c.adjustments["project"] == pytest.approx(0.8) for c in ranked[1:])
    req = RecallQuery.parse(
        eng.config, dict(query="where is the staging cluster?", project=["alpha", "beta"], reference_time=REF)
    )
    assert req.project == "alpha" and req.searched_projects == ("alpha", "beta")  # current: the first listed
    res = await eng.recall(req.model_copy(update={"count_accesses": False}))
    assert [m["project"] for m in res.rendered["memories"]] == ["alpha", "beta"]  # each shows its project
    retrieval = next(s for s in res.trace.stages if s.stage == "retrieval")
    assert set(retrieval.detail["projects"]) == {"alpha", "beta"}
    assert [s.stage for s in res.trace.stages].count("retrieval") == 1


async def test_a_better_match_elsewhere_can_still_beat_the_current_project(make_engine):
    eng = await make_engine()
    await eng.remember({"content": "Alice prefers tabs over spaces in Python code", "project": "other"})
    await eng.remember({"content": "Tabs were mentioned in a meeting", "project": "here"})
    ranked = await _ranked(eng, "does Alice prefer tabs or spaces in Python?", project=["here", "other"])
    assert ranked[0].memory.project == "other"
    assert ranked[0].adjustments["project"] == pytest.approx(0.8)


async def test_project_lists_are_checked(make_engine):
    eng = await make_engine()
    with pytest.raises(InvalidInput, match="empty list"):
        RecallQuery.parse(eng.config, dict(query="q", project=[]))
    with pytest.raises(InvalidInput, match="every project"):
        RecallQuery.parse(eng.config, dict(query="q", project=["*", "a"]))
    with pytest.raises(InvalidInput, match="expanded"):
        RecallQuery.parse(eng.config, dict(query="q", project="*"))
    with pytest.raises(InvalidInput, match="project must be a string"):
        RecallQuery.parse(eng.config, dict(query="q", project=["a", 3]))
    req = RecallQuery.parse(eng.config, dict(query="q", project="b", current_project="a"))
    assert req.project == "a" and req.searched_projects == (
        "a",
        "b",
    )  # the current project is always searched
    assert not RecallQuery.parse(eng.config, dict(query="q", project=["a", "a"])).spans_projects  # isolated


async def test_the_adjustments_switch_and_the_ablation_variant(make_engine):
    from memlane.bench.methods import ablation_methods

    eng = await make_engine()
    names = [m.name for m in ablation_methods(eng)]
    assert "fused-no-adjustments" in names
    await eng.remember({"content": "Pinned runbook for the pager", "pinned": True, "project": "p"})
    req = RecallQuery.parse(eng.config, dict(query="pager runbook", project="p"))
    res = await eng.recall(
        req.model_copy(update={"count_accesses": False, "ablation": Ablation(adjustments=False)})
    )
    stage = next(s for s in res.trace.stages if s.stage == "adjustments")
    assert stage.status == "skipped: adjustments switched off"
    assert res.ranked[0].adjustments == {}


# -- over MCP and on the command line ------------------------------------------------------------


async def test_recall_tool_spans_a_list_of_projects_or_every_project_and_shows_each_ones_project(connect):
    async with connect() as client:
        for project in ("default", "web", "mobile"):
            await call_ok(
                client, "remember", {"content": f"The {project} release ships on Fridays", "project": project}
            )
        out = await call_ok(client, "recall", {"query": "when does the release ship?"})
        assert [m.get("project") for m in out["memories"]] == [None]  # one project: isolated, as before
        out = await call_ok(
            client,
            "recall",
            {
                "query": "when does the release ship?",
                "project": ["web", "mobile"],
                "current_project": "mobile",
            },
        )
        assert [m["project"] for m in out["memories"]] == ["mobile", "web"]
        out = await call_ok(
            client, "recall", {"query": "when does the release ship?", "project": "*", "explain": True}
        )
        assert {m["project"] for m in out["memories"]} == {"default", "web", "mobile"}
        assert out["memories"][0]["project"] == "default"  # '*': the default project is the current one
        assert out["memories"][0]["adjustments"]["project"] == pytest.approx(1.3)
        assert all(m["adjustments"]["project"] == pytest.approx(0.8) for m in out["memories"][1:])
        stage = next(s for s in out["trace"]["stages"] if s["stage"] == "adjustments")
        assert stage["status"] == "ran" and "project" in stage["detail"]["factors"]
        assert stage["detail"]["current_project"] == "default"
        assert "every project" in await call_error(
            client, "recall", {"query": "release", "project": ["*", "web"]}
        )
        assert "empty list" in await call_error(client, "recall", {"query": "release", "project": []})
        # The server keeps working after the errors.
        await call_ok(client, "recall", {"query": "when does the release ship?"})


async def test_explain_shows_each_memorys_factors_and_a_plain_recall_does_not(connect):
    async with connect() as client:
        await call_ok(
            client,
            "remember",
            {"content": "Pinned: the prod database password rotates monthly", "pinned": True, "priority": 5},
        )
        out = await call_ok(
            client, "recall", {"query": "how often does the password rotate?", "explain": True}
        )
        [m] = out["memories"]
        assert m["adjustments"]["pinned"] == pytest.approx(1.1)
        assert m["adjustments"]["priority"] == pytest.approx(1.5)  # priority 5, never recalled: hot 0.5
        out = await call_ok(client, "recall", {"query": "how often does the password rotate?"})
        assert "adjustments" not in out["memories"][0] and "score" not in out["memories"][0]


def test_bench_variants_rescore_the_same_candidates():
    from types import SimpleNamespace

    from memlane.bench import adjustments as bench_adjust

    old = make_memory("old exact", occurred_at=REF - timedelta(days=300))
    new = make_memory("new", occurred_at=REF - timedelta(days=1))
    ranked = [
        Candidate(old, 1.0, base_score=1.0, adjustments={"priority": 1.25}),
        Candidate(new, 0.9, base_score=0.9),
    ]
    table = bench_adjust.variants(DecayConfig(), AdjustConfig())
    req = SimpleNamespace(reference_time=REF, searched_projects=("p",), project="p")
    out = bench_adjust.rescored(SimpleNamespace(ranked=ranked), req, table)
    assert [c.memory.content for c in out["none"].ranked] == ["old exact", "new"]
    assert [c.memory.content for c in out["decay share=0.5 half-life=30d"].ranked] == ["new", "old exact"]
    assert [c.memory.content for c in out["decay share=0.05 half-life=30d"].ranked] == ["old exact", "new"]


async def test_a_centroid_miss_fills_the_cache_with_the_projects_other_categories(make_engine, monkeypatch):
    """The asked categories are read at once; the project's others follow in the background, so
    the next recalls there find them cached. A project with too many categories is not filled."""
    from memlane.pipeline.store import scoring

    eng = await make_engine()
    await eng.remember_many(
        [{"content": f"note {i} about {c}", "project": "p", "category": c} for i in range(2) for c in "abc"]
        + [{"content": f"other {c}", "project": "q", "category": c} for c in "xyz"]
    )
    store = eng.store
    store.__dict__.pop("_centroids", None)
    got = await store.category_centroids([("p", "a")], max_age_s=60)
    assert set(got) == {("p", "a")} and abs(float(np.linalg.norm(got[("p", "a")])) - 1.0) < 1e-5
    await asyncio.gather(*store.__dict__["_filling"].values())
    assert {pair for pair in store.__dict__["_centroids"] if pair[0] == "p"} == {
        ("p", "a"),
        ("p", "b"),
        ("p", "c"),
    }
    before = await store.category_centroids([("p", "b"), ("p", "c")], max_age_s=60)
    store.__dict__.pop("_centroids")
    assert all(
        np.allclose(before[k], v)
        for k, v in (await store.category_centroids([("p", "b"), ("p", "c")])).items()
    )
    # A project with more categories than PROJECT_CATEGORIES is not filled.
    monkeypatch.setattr(scoring, "PROJECT_CATEGORIES", 2)
    await store.category_centroids([("q", "x")], max_age_s=60)
    await asyncio.gather(*store.__dict__["_filling"].values())
    assert {pair for pair in store.__dict__["_centroids"] if pair[0] == "q"} == {("q", "x")}


async def test_a_cached_centroid_is_read_again_once_another_server_changes_its_category(
    engine_config, open_engine
):
    """Two servers on one database: a centroid one of them cached is not used once the other has
    written to that category, however young the cache, so both weigh the category alike."""
    a = await open_engine(engine_config)
    b = await open_engine(engine_config)
    await a.remember_many(
        [
            {"content": f"deploy step {i}: run the migrations", "project": "p", "category": "ops"}
            for i in range(3)
        ]
    )
    first = await a.store.category_centroids([("p", "ops")], max_age_s=3600)
    again = await a.store.category_centroids([("p", "ops")], max_age_s=3600)
    assert np.array_equal(first[("p", "ops")], again[("p", "ops")])
    await b.remember_many(
        [
            {"content": f"holiday photo {i} of a sunny beach in Lisbon", "project": "p", "category": "ops"}
            for i in range(3)
        ]
    )
    cached = await a.store.category_centroids([("p", "ops")], max_age_s=3600)
    fresh = await b.store.category_centroids([("p", "ops")])
    assert not np.allclose(cached[("p", "ops")], first[("p", "ops")])
    assert np.allclose(cached[("p", "ops")], fresh[("p", "ops")])
