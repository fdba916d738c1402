"""The seams new features plug into: the arm registry, the stage contract, one memory input model,
settings and secrets found by type. Pure parts without a database; the rest on real PostgreSQL."""

from types import SimpleNamespace

import pytest
from pydantic import SecretStr
from support.records import make_memory

from memlane.pipeline.config import (
    DatabaseConfig,
    EngineConfig,
    RecallConfig,
    masked_dump,
    secret_fields,
)
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall import arms, fuse
from memlane.pipeline.recall.retrieve import Retrieved, retrieve
from memlane.pipeline.recall.stage import Step, run_stage
from memlane.pipeline.records import Memory, Query, Trace
from memlane.pipeline.remember.inputs import MemoryInput, MemoryPatch
from memlane.pipeline.store.search import SQL_ARMS
from memlane.server.settings import Settings

pytestmark = pytest.mark.anyio
CFG = EngineConfig()


def mem(content: str) -> Memory:
    return make_memory(content)


# -- the arm registry --------------------------------------------------------------------------


def test_every_registered_arm_can_run():
    for arm in arms.REGISTRY.values():
        assert arm.run is not None or arm.name in SQL_ARMS, f"arm {arm.name} has neither SQL nor a runner"
        assert arm.needs <= arms.NEEDS


def test_an_unknown_arm_is_an_error_not_an_empty_result():
    with pytest.raises(InvalidInput, match="unknown retrieval arm.*known: vector, keyword"):
        arms.resolve(("vector", "no-such-arm"))
    with pytest.raises(InvalidInput, match="at least one"):
        arms.resolve(())
    assert [a.name for a in arms.resolve(("keyword", "vector"))] == ["vector", "keyword"]


def test_arm_weights_default_to_every_arm_and_refuse_unknown_arms():
    defaults = arms.default_weights()
    assert RecallConfig().arm_weights == defaults
    assert {"vector": 1.0, "keyword": 1.0}.items() <= defaults.items()
    assert RecallConfig(arm_weights={"keyword": 0.5}).arm_weights == {**defaults, "keyword": 0.5}
    with pytest.raises(ValueError, match="unknown arm"):
        RecallConfig(arm_weights={"no-such-arm": 1.0})
    with pytest.raises(ValueError, match="from 0 to 100"):
        RecallConfig(arm_weights={"vector": -1.0})


def test_the_old_per_arm_weight_keys_still_configure_fusion():
    cfg = RecallConfig.model_validate({"vector_weight": 2.0, "keyword_weight": 0.5})
    assert cfg.arm_weights == {**arms.default_weights(), "vector": 2.0, "keyword": 0.5}


# -- fusion ------------------------------------------------------------------------------------


def retrieved(scores: dict[str, dict[str, float]]) -> tuple[Retrieved, dict[str, Memory]]:
    r = Retrieved()
    by_name = {}
    for name, s in scores.items():
        m = mem(name)
        by_name[name] = m
        r.memories[str(m.id)] = m
        r.scores[str(m.id)] = dict(s)
    return r, by_name


def test_score_fusion_divides_bm25_by_the_best_and_adds_cosine_as_it_is():
    r, _ = retrieved({"a": {"vector": 0.5, "keyword": 4.0}, "b": {"vector": 0.7, "keyword": 2.0}})
    fused = fuse.score_fusion(r, {"vector": 1.0, "keyword": 1.0})
    assert [(c.memory.content, round(c.score, 6)) for c in fused] == [("a", 1.5), ("b", 1.2)]
    assert fused[0].arm_scores == {"vector": 0.5, "keyword": 4.0}  # raw scores kept for stage 7


def test_score_fusion_follows_the_configured_weights():
    r, _ = retrieved({"a": {"vector": 0.5, "keyword": 4.0}, "b": {"vector": 0.7, "keyword": 2.0}})
    fused = fuse.score_fusion(r, {"vector": 3.0, "keyword": 0.2})
    # a: 3*0.5 + 0.2*1.0 = 1.7; b: 3*0.7 + 0.2*0.5 = 2.2
    assert [(c.memory.content, round(c.score, 6)) for c in fused] == [("b", 2.2), ("a", 1.7)]


def test_score_fusion_counts_nothing_for_an_arm_without_a_score_and_survives_no_keyword_match():
    r, _ = retrieved({"a": {"vector": 0.4}, "b": {"vector": 0.3, "keyword": 0.0}})
    fused = fuse.score_fusion(r, {"vector": 1.0, "keyword": 1.0})
    assert [(c.memory.content, round(c.score, 6)) for c in fused] == [("a", 0.4), ("b", 0.3)]


def test_score_fusion_breaks_ties_the_same_way_every_run():
    r, _ = retrieved({"zeta": {"vector": 0.5}, "alpha": {"vector": 0.5}})
    assert [c.memory.content for c in fuse.score_fusion(r, {})] == ["alpha", "zeta"]


# -- the stage contract -------------------------------------------------------------------------


def ctx(**kw):
    return SimpleNamespace(trace=Trace(), **kw)


async def test_an_optional_stage_that_raises_is_degraded_and_its_input_flows_on():
    c = ctx()

    def broken(_, value):
        raise TimeoutError("the provider did not answer in 8 s")

    out = await run_stage(c, "rerank", broken, [1, 2, 3], fallback=[1, 2, 3])
    assert out == [1, 2, 3]
    [st] = c.trace.stages
    assert st.status == "degraded: TimeoutError: the provider did not answer in 8 s"
    assert (st.count_in, st.count_out) == (3, 3)


async def test_a_required_stage_that_raises_fails_the_recall_but_keeps_the_trace():
    c = ctx()

    async def broken(_, value):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await run_stage(c, "retrieval", broken, [1])
    assert c.trace.stages[0].status == "failed: RuntimeError: boom"


async def test_a_stage_reports_its_status_detail_and_prompt_through_its_step():
    c = ctx()
    out = await run_stage(
        c,
        "intent",
        lambda _, v: Step(v[:1], status="ran", detail={"x": 1}, prompt="intent@v1#0123abcd"),
        [1, 2],
    )
    assert out == [1]
    st = c.trace.stages[0]
    assert st.detail == {"x": 1, "prompt": "intent@v1#0123abcd"} and (st.count_in, st.count_out) == (2, 1)


# -- one memory input --------------------------------------------------------------------------


def test_memory_input_applies_defaults_and_the_configured_limits():
    m = MemoryInput.parse(CFG, {"content": "  Alice likes tea  ", "tags": ["Tea", "tea"], "priority": None})
    assert (m.content, m.project, m.tags, m.priority, m.pinned, m.metadata) == (
        "Alice likes tea",
        "default",
        ("tea",),
        3,
        False,
        {},
    )
    small = CFG.model_copy(update={"remember": CFG.remember.model_copy(update={"max_content_chars": 5})})
    with pytest.raises(InvalidInput, match="maximum is 5"):
        MemoryInput.parse(small, {"content": "too long"})


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"content": "x", "pinned": "yes"}, "pinned must be true or false"),
        ({"content": "x", "priority": 9}, "out of range"),
        ({"content": "x", "priority": "3"}, "priority must be an integer"),
        ({"content": "x", "occurred_at": "yesterday"}, "occurred_at: 'yesterday' is not an ISO 8601"),
        ({"content": "x", "colour": "red"}, r"unknown field\(s\) colour"),
        ({"content": 3}, "content must be a string"),
        ({"content": "x", "metadata": [1]}, "metadata must be a JSON object"),
        ({"content": "half a pair \ud800"}, "content is not valid Unicode"),
        ({"content": "x", "metadata": {"k": "\udfff"}}, "metadata is not valid Unicode"),
        ({"content": "x", "tags": ["ok", "\ud83d"]}, "a tag is not valid Unicode"),
        ({"content": "x", "project": "p\ud800"}, "project is not valid Unicode"),
        ({"content": "x", "source": "a\x00b"}, "source contains a NUL"),
    ],
)
def test_memory_input_errors_say_what_is_accepted(item, message):
    with pytest.raises(InvalidInput, match=message):
        MemoryInput.parse(CFG, item)


@pytest.mark.parametrize(
    ("query", "message"), [("a\x00b", "query contains a NUL"), ("lone \ud800", "query is not valid Unicode")]
)
async def test_a_query_postgres_or_the_tokenizer_cannot_read_is_refused_clearly(engine, query, message):
    with pytest.raises(InvalidInput, match=message):
        engine.recall_request(query)


def test_memory_patch_keeps_only_what_was_given_and_refuses_project_changes():
    patch = MemoryPatch.parse(CFG, {"content": "new text", "priority": None, "pinned": False})
    assert patch.changes() == {"content": "new text", "pinned": False}
    with pytest.raises(InvalidInput, match=r"unknown updatable field\(s\) project"):
        MemoryPatch.parse(CFG, {"project": "other"})
    with pytest.raises(InvalidInput, match="nothing to update"):
        MemoryPatch.parse(CFG, {"content": None})


# -- settings and secrets ----------------------------------------------------------------------


def test_secrets_are_found_by_type_and_masked_in_reports():
    assert set(secret_fields(Settings)) == {
        ("database", "url"),
        ("embedding", "api_key"),
        ("llm", "api_key"),
        ("auth", "tokens"),
    }
    cfg = EngineConfig(database=DatabaseConfig(url=SecretStr("postgresql://u:hunter2@h/db")))
    dumped = masked_dump(cfg)
    assert dumped["database"]["url"] == "set" and dumped["embedding"]["api_key"] is None
    assert "hunter2" not in repr(dumped)


def test_settings_hand_the_engine_the_same_sections_with_the_real_secret():
    s = Settings(database=DatabaseConfig(url=SecretStr("postgresql://u:pw@h/db")))
    e = s.engine()
    assert type(e) is EngineConfig and "server" not in type(e).model_fields
    assert e.database is s.database and e.database.url.get_secret_value() == "postgresql://u:pw@h/db"


# -- retrieval over every query text (real PostgreSQL) -----------------------------------------


async def test_every_query_text_and_the_hyde_passage_get_their_own_lists(engine):
    filler = [{"content": f"Note {i}: the weekly sync covered topic number {i}"} for i in range(30)]
    await engine.remember_many([{"content": "The billing service stores invoices in PostgreSQL"}, *filler])
    req = engine.recall_request("where are invoices kept?")
    c = SimpleNamespace(
        config=engine.config, store=engine.store, embedder=engine.embedder, request=req, arms=None
    )
    query = Query(
        text=req.query, variants=("invoice storage database",), hypothetical="Invoices live in Postgres."
    )
    step = await retrieve(c, query)
    lists = step.value.lists
    assert {"vector", "keyword", "vector:1", "keyword:1", "vector:hyde"} <= set(lists)
    assert "keyword:hyde" not in lists  # HyDE feeds the arms that need an embedding only
    assert lists["vector:hyde"][0][0].content == "The billing service stores invoices in PostgreSQL"
    assert lists["keyword"][0][0].content == "The billing service stores invoices in PostgreSQL"


async def test_an_engine_given_an_llm_object_uses_it_for_every_llm_stage(engine_config, embedder):
    from support.llm_fakes import ScriptedLLM

    from memlane.pipeline.engine import Engine

    llm = ScriptedLLM()
    assert engine_config.llm.provider == "none"
    eng = Engine(engine_config, embedder=embedder, llm=llm)
    await eng.open()
    try:
        await eng.remember({"content": "The user prefers dark mode in every editor"})
        res = await eng.recall(
            eng.recall_request("Which colour theme does the user like in editors?", mode="full")
        )
    finally:
        await eng.close()
    status = {s.stage: s.status for s in res.trace.stages}
    assert [status[s] for s in ("intent", "synthesis", "hyde", "rerank")] == ["ran"] * 4
    assert sorted(c["stage"] for c in llm.calls) == ["hyde", "intent", "rerank", "synthesis"]
    assert res.memories[0][0].content == "The user prefers dark mode in every editor"


async def test_the_vector_arm_finds_the_same_hits_alone_or_inside_the_scoring_statement(engine, monkeypatch):
    """The vector arm's top k is selected inside the union's scoring statement when the keyword arm
    finished during the embedding, and by a statement of its own when it did not: same hits, same
    scores, either way."""
    import asyncio
    import time

    await engine.remember_many(
        [
            {"content": f"Note {i}: the {w} service moved its invoices to cluster {i % 7}"}
            for i, w in enumerate(["billing", "payments", "search", "mobile", "ledger"] * 12)
        ]
    )
    req = engine.recall_request("which cluster holds the billing invoices?")
    slow: dict[str, bool] = {}
    calls: list[str] = []
    real_candidates = type(engine.store).candidates
    real_embed = engine.embedder.embed_queries

    async def candidates(self, arm, **kw):
        calls.append(arm)
        ids = await real_candidates(self, arm, **kw)
        if arm == "keyword" and slow.get("keyword"):
            await asyncio.sleep(1.0)  # still running when the embedding is done
        return ids

    def embed_queries(texts):
        if slow.get("embedding"):
            time.sleep(1.0)  # the keyword arm is done long before
        return real_embed(texts)

    monkeypatch.setattr(type(engine.store), "candidates", candidates)
    monkeypatch.setattr(engine.embedder, "embed_queries", embed_queries)

    async def run(which: str):
        slow.clear()
        slow[which] = True
        calls.clear()
        c = SimpleNamespace(
            config=engine.config, store=engine.store, embedder=engine.embedder, request=req, arms=None
        )
        out = (await retrieve(c, Query(text=req.query))).value
        return {k: [(str(m.id), round(s, 6)) for m, s in v] for k, v in out.lists.items()}, list(calls)

    inline, inline_calls = await run("embedding")
    alone, alone_calls = await run("keyword")
    assert inline_calls == ["keyword"] and sorted(alone_calls) == ["keyword", "vector"]
    assert inline["vector"] and inline == alone


async def test_the_question_terms_the_keyword_arm_read_score_as_computing_them_again(engine):
    """The statements after the embedding take the question's lexemes, idfs and tsquery as the
    keyword arm's statement read them (``QueryTerms``) instead of computing them again: same
    hits, same scores, with or without them; also for a question with no lexeme at all."""
    await engine.remember_many(
        [
            {"content": f"Note {i}: the {w} service moved its invoices to cluster {i % 7}"}
            for i, w in enumerate(["billing", "payments", "search", "mobile", "ledger"] * 6)
        ]
        + [{"content": "Billing invoices: billing owns billing disputes"}]
    )
    store = engine.store
    for question in ("billing invoices in which cluster?", "and the of it"):
        ids, scores, terms = await store.candidates("keyword", project="default", query=question, k=8)
        assert terms is not None and bool(terms.lexemes) == (question != "and the of it")
        assert len(scores) == len(ids) and scores == sorted(scores, reverse=True)
        embedding = engine.embedder.embed_query(question)
        common = {"project": "default", "query": question, "embedding": embedding, "k": 8}
        given = await store.search(**common, preselected={"keyword": ids}, terms=terms)
        again = await store.search(**common, preselected={"keyword": ids})
        assert [(h.memory.id, h.found_by) for h in given] == [(h.memory.id, h.found_by) for h in again]
        assert [h.scores for h in given] == [pytest.approx(h.scores, rel=1e-12) for h in again]
        if terms.lexemes:  # the keyword arm found the billing notes, and scored them
            assert ids and max(h.scores["keyword"] for h in given) > 0
            # the scores it returned with its candidates are those the scoring statement computes
            assert dict(zip(ids, scores, strict=True)) == pytest.approx(
                {h.memory.id: h.scores["keyword"] for h in given if h.memory.id in set(ids)}, rel=1e-9
            )
    vec_ids, no_scores, none = await store.candidates(
        "vector", project="default", query="x", k=3, embedding=embedding
    )
    assert none is None and no_scores is None and len(vec_ids) == 3
