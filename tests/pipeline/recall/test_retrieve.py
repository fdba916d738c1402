"""Stage 4, retrieval on real PostgreSQL: a list per query text and per arm, the vector arm inside
or outside the scoring statement, and the keyword arm's question terms reused."""

from uuid import UUID

import pytest

from memlane.pipeline.errors import EmbeddingFailed
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.query import Ablation, RecallQuery
from memlane.pipeline.recall.retrieve import retrieve
from memlane.pipeline.records import Query
from memlane.pipeline.request import Filters

DEFAULT = Filters(projects=("default",))  # the store's statements read one project

pytestmark = pytest.mark.anyio


async def test_every_query_text_and_the_hypothetical_memory_get_their_own_lists(engine):
    filler = [{"content": f"Note {i}: the weekly sync covered topic number {i}"} for i in range(30)]
    await engine.remember_many([{"content": "The billing service stores invoices in PostgreSQL"}, *filler])
    req = RecallQuery.parse(engine.config, dict(query="where are invoices kept?"))
    c = RecallContext(
        config=engine.config, store=engine.store, embedder=engine.embedder, llm=None, request=req
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
    req = RecallQuery.parse(engine.config, dict(query="which cluster holds the billing invoices?"))
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
        c = RecallContext(
            config=engine.config, store=engine.store, embedder=engine.embedder, llm=None, request=req
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
        ids, scores, terms = await store.candidates("keyword", text=question, filters=DEFAULT, k=8)
        assert terms is not None and bool(terms.lexemes) == (question != "and the of it")
        assert len(scores) == len(ids) and scores == sorted(scores, reverse=True)
        embedding = engine.embedder.embed_query(question)
        common = {"filters": DEFAULT, "text": question, "embedding": embedding, "k": 8}
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
        "vector", text="x", filters=DEFAULT, k=3, embedding=embedding
    )
    assert none is None and no_scores is None and len(vec_ids) == 3


@pytest.mark.parametrize(
    ("max_postings", "selected", "capped"),
    [(12, {"checklist", "pipeline"}, 1), (3, set(), 3), (10_000, {"checklist", "pipeline", "deploy"}, 0)],
)
async def test_the_keyword_arm_reads_at_most_max_postings_and_the_trace_says_so(
    engine_config, open_engine, max_postings, selected, capped
):
    """Rarest lexemes first while their postings add up to at most recall.keyword_max_postings: the
    rest only score. keyword_common_df = 1 leaves every lexeme to the cap."""
    recall = engine_config.recall.model_copy(
        update={"keyword_common_df": 1.0, "keyword_max_postings": max_postings}
    )
    engine = await open_engine(engine_config.model_copy(update={"recall": recall}))
    words = lambda i: ("checklist " if i < 4 else "") + ("pipeline " if 4 <= i < 12 else "")  # noqa: E731
    await engine.remember_many([{"content": f"Note {i}: {words(i)}deploy to cluster {i}"} for i in range(60)])
    req = RecallQuery.parse(engine.config, dict(query="deploy pipeline checklist", explain=True))
    result = await engine.recall(req.model_copy(update={"count_accesses": False}))
    [stage] = [s for s in result.trace.stages if s.stage == "retrieval"]
    bound = stage.detail["keyword"]
    postings = {"checklist": 4, "pipeline": 8, "deploy": 60}
    assert bound == {
        "postings": sum(postings[w] for w in selected),
        "max_postings": max_postings,
        "terms_capped": capped,
    }
    hits = stage.detail["hits"].get("keyword", [])
    contents = [(await engine.store.get(UUID(h[0]))).content for h in hits]
    assert len(hits) == min(sum(postings[w] for w in selected), engine.config.recall.per_arm(req.limit))
    assert all(any(w in c for w in selected) for c in contents)
    graph = stage.detail["graph"]["bound"]
    assert graph["max_entity_degree"] == engine.config.graph.max_entity_degree and graph["per_node"] > 0


@pytest.mark.parametrize(("limit", "per_arm"), [(2, 4), (9, 9)])
async def test_a_recall_asking_for_more_than_candidates_per_arm_gets_that_many_per_arm(
    engine_config, open_engine, limit, per_arm
):
    """recall.candidates_per_arm is a floor: a caller asking for more memories than it gets that
    many from each arm, so the limit is never out of reach for want of candidates."""
    recall = engine_config.recall.model_copy(update={"candidates_per_arm": 4})
    engine = await open_engine(engine_config.model_copy(update={"recall": recall}))
    await engine.remember_many(
        [{"content": f"Ticket {i}: the invoice export failed for customer {i}"} for i in range(12)]
    )
    req = RecallQuery.parse(engine.config, dict(query="invoice export failed", limit=limit, explain=True))
    result = await engine.recall(req.model_copy(update={"count_accesses": False}))
    [stage] = [s for s in result.trace.stages if s.stage == "retrieval"]
    assert len(stage.detail["hits"]["keyword"]) == per_arm
    assert len(stage.detail["hits"]["vector"]) == per_arm
    assert len(result.memories) == limit


async def test_the_question_is_embedded_once_from_the_start_of_the_recall(engine, monkeypatch):
    """With no LLM to add texts, the question's embedding starts with the recall, before stage 1,
    and retrieval takes it: a recall across projects embeds it once, not once per project, and
    finds what each project's own recall finds."""
    for project in ("alpha", "beta"):
        await engine.remember(
            {"content": f"The {project} team keeps invoices in PostgreSQL", "project": project}
        )
    calls: list[list[str]] = []
    real = engine.embedder.embed_queries

    def spy(texts):
        calls.append(list(texts))
        return real(texts)

    monkeypatch.setattr(engine.embedder, "embed_queries", spy)
    across = await engine.recall(dict(query="where are invoices kept?", project=["alpha", "beta"]))
    assert calls == [["where are invoices kept?"]]
    assert {m.content for m, _ in across.memories} == {
        "The alpha team keeps invoices in PostgreSQL",
        "The beta team keeps invoices in PostgreSQL",
    }
    calls.clear()
    alone = await engine.recall(dict(query="where are invoices kept?", project="alpha"))
    assert calls == [["where are invoices kept?"]]
    assert [m.content for m, _ in alone.memories] == ["The alpha team keeps invoices in PostgreSQL"]


async def test_a_failed_question_embedding_still_answers_from_the_keyword_arm(engine, monkeypatch):
    await engine.remember({"content": "The billing service stores invoices in PostgreSQL"})

    def broken(texts):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(engine.embedder, "embed_queries", broken)
    result = await engine.recall(dict(query="where are invoices stored?", explain=True))
    assert [m.content for m, _ in result.memories] == ["The billing service stores invoices in PostgreSQL"]
    retrieval = next(st for st in result.trace.stages if st.stage == "retrieval")
    assert retrieval.status.startswith("degraded: ") and "model crashed" in retrieval.status


async def test_retrieval_embedding_its_texts_itself_still_degrades_to_the_keyword_arm(engine, monkeypatch):
    """Without an embedding started with the recall (an LLM may add texts, or retrieval is called
    alone), a failed embedding still leaves the keyword arm to answer."""
    await engine.remember({"content": "The billing service stores invoices in PostgreSQL"})

    def broken(texts):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(engine.embedder, "embed_queries", broken)
    req = RecallQuery.parse(engine.config, dict(query="where are invoices stored?"))
    c = RecallContext(
        config=engine.config, store=engine.store, embedder=engine.embedder, llm=None, request=req
    )
    step = await retrieve(c, Query(text=req.query))
    assert step.status.startswith("degraded: ") and "model crashed" in step.status
    assert step.value.lists["keyword"][0][0].content == "The billing service stores invoices in PostgreSQL"


async def test_a_failed_embedding_fails_a_recall_whose_arms_all_need_it(engine, monkeypatch):
    await engine.remember({"content": "The billing service stores invoices in PostgreSQL"})

    def broken(texts):
        raise RuntimeError("model crashed")

    monkeypatch.setattr(engine.embedder, "embed_queries", broken)
    with pytest.raises(EmbeddingFailed, match="model crashed"):
        await engine.recall(dict(query="where are invoices stored?", ablation=Ablation(arms=("vector",))))
