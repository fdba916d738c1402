"""``memlane bench latency`` past its pool: the pool-derived build goes through the same write path,
the real sample times the throughput ratio, a kept store is measured again without a rebuild, and
the memory and bounds a size reports are there. Small sizes, on the session's PostgreSQL."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import psycopg
import pytest

from memlane.bench import latency, report
from memlane.bench.corpus import Corpus
from memlane.server.settings import load


@pytest.fixture
def bench_settings(database_url, tmp_path):
    return load(data_dir=tmp_path, database={"url": database_url})


def _run(settings, sizes, embedder, *, queries=3, **kwargs):
    """``latency.run`` on small sizes, quietly."""
    return asyncio.run(
        latency.run(settings, sizes, queries=queries, embedder=embedder, show_progress=False, **kwargs)
    )


def test_pool_vectors_are_distinct_unit_and_near_a_related_pool_text(embedder):
    pooled = latency.PoolEmbedder(embedder, pool=3)
    pool_texts = [
        "Alice Moreau moved billing to Kafka.",
        "Chen Wei owns the search index.",
        "Lunch was late.",
    ]
    pool_vecs = np.asarray(pooled.embed_memories(pool_texts))
    pooled.mode = "pool"
    texts = ["Alice Moreau said billing retries double.", "Alice Moreau: billing is on call this week."]
    vecs = np.asarray(pooled.embed_memories(texts))
    assert pooled.derived == 2
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert not np.allclose(vecs[0], vecs[1])  # distinct texts, distinct vectors
    assert np.allclose(pooled.embed_memories(texts[:1])[0], vecs[0])  # seeded by the text
    # Both name Alice Moreau and billing: derived from the first pool text, at the noise's cosine.
    cos = vecs @ pool_vecs[0]
    assert np.allclose(cos, 1 / np.sqrt(1 + latency.NOISE**2), atol=0.05)
    assert np.asarray(pooled.embed_queries(["billing?"])).shape == (1, embedder.dim)  # the model's


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_a_size_past_the_pool_is_built_through_remember_many(bench_settings, embedder, database_url):
    partials: list[dict] = []
    with psycopg.connect(database_url) as conn:
        started = conn.execute("SELECT now()").fetchone()[0]
    result = _run(bench_settings, [40, 200], embedder, pool=40, sample=32, partial=partials.append)
    assert [len(p["sizes"]) for p in partials] == [1, 2]  # the report so far, after each size
    small, large = result["sizes"]
    assert small["remember"]["real_embedded"] == 40 and "pool_build" not in small
    assert large["remember"] == {**large["remember"], "added": 160, "created": 160, "real_embedded": 32}
    assert large["embedding"]["texts"] == 32  # the same sample, embedded bare too
    assert large["pool_build"]["memories"] == 128 and large["pool_build"]["per_second"] > 0
    assert result["config"]["derived_vectors"] == 128 and "pool-derived" in result["config"]["build"]
    assert large["memory"] is None  # a database the bench did not start: not its memory
    assert large["database_mb"] > 0
    # CPU per call: this process, and the session's PostgreSQL (on this machine: its postmaster is
    # found from a backend), for recall and for the floor it is measured against.
    for side in ("recall", "floor"):
        c = large["cpu"][side]
        assert c["engine_ms"] > 0 and c["database_ms"] > 0
        assert c["total_ms"] == pytest.approx(c["engine_ms"] + c["database_ms"], abs=0.02)
    assert large["cpu"]["cores"] >= 1
    assert "CPU per call" in report.latency_markdown(result)
    names = [t["name"] for t in result["targets"]]
    assert names[2] == "recall p50 at the largest size (none over 10k) / p50 at 10k"
    assert result["targets"][2]["result"] == "not measured"
    assert "Pool path" in report.latency_markdown(result)
    # What the timed recalls returned, judged by the corpus's templates, at each size.
    for s in result["sizes"]:
        q = s["quality"]
        assert q["questions"] == 3 and sum(t["questions"] for t in q["by_template"].values()) == 3
        assert all(0.0 <= q[f"p@{k}"] <= 1.0 for k in latency.QUALITY_AT)
    assert "share of relevant memories" in report.latency_markdown(result)
    with psycopg.connect(database_url) as conn:  # the run's projects are gone
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        # Settled before the timed parts: vacuumed and analysed by the bench, not by autovacuum.
        vacuumed, analysed = conn.execute(
            "SELECT last_vacuum, last_analyze FROM pg_stat_user_tables WHERE relname = 'memories'"
        ).fetchone()
    assert vacuumed >= started and analysed >= started
    assert large["pool_build"]["settle_seconds"] >= 0 and all(
        s["settle_seconds"] >= 0 for s in result["sizes"]
    )


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_a_kept_store_is_measured_again_and_grown_from_where_it_ends(bench_settings, embedder, database_url):
    def run(sizes):
        return asyncio.run(
            latency.run(
                bench_settings, sizes, queries=2, embedder=embedder, show_progress=False, pool=30, keep=True
            )
        )

    first = run([60])
    assert first["config"]["reused_store_memories"] == 0
    again = run([30, 60, 90])
    assert again["config"]["reused_store_memories"] == 60
    kept, grown = again["sizes"]  # 30 is smaller than the kept store: not measurable any more
    assert kept["memories"] == 60 and kept["reused"] and kept["remember_vs_embedding"] is None
    assert grown["memories"] == 90 and grown["remember"]["created"] == 30  # the stream went on
    assert "| 60 | - |" in report.latency_markdown(again)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 90


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_a_kept_store_resumed_past_a_gap_skips_the_texts_it_holds(bench_settings, embedder, database_url):
    # A build stopped midway stored some batches past the point the stream resumes from (the pool
    # path has several in flight). Losing the store's last memories makes the same gap: the resumed
    # stream repeats them, and remember_many stores each text once.
    def run(sizes):
        return asyncio.run(
            latency.run(
                bench_settings, sizes, queries=2, embedder=embedder, show_progress=False, pool=30, keep=True
            )
        )

    run([60])
    gap = [it.content for it in Corpus(7).take(60)[40:50]]  # the seed latency.run uses by default
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert conn.execute("DELETE FROM memories WHERE content = ANY(%s)", (gap,)).rowcount == 10
    grown = run([80])["sizes"][0]
    # The store holds 50: the stream resumes after its 50th item, and its items 51-60 are stored
    # already. They are skipped, so the step adds 30 new texts.
    assert grown["remember"]["added"] == grown["remember"]["created"] == 30
    with psycopg.connect(database_url) as conn:
        total, distinct = conn.execute("SELECT count(*), count(DISTINCT content) FROM memories").fetchone()
    assert total == distinct == 80


def test_the_growth_target_compares_the_largest_size_with_10k():
    def size(n, p50):
        return {"memories": n, "recall": {"p50": p50}, "recall_vs_floor": 1.0, "remember_vs_embedding": 1.0}

    targets = latency.evaluate_targets([size(1000, 10), size(10_000, 20), size(1_000_000, 31)])
    growth = targets[2]
    assert growth["name"] == "recall p50 at the largest size (1M) / p50 at 10k"
    assert (growth["value"], growth["result"]) == (1.55, "FAIL")
    assert latency.evaluate_targets([size(10_000, 20), size(100_000, 25)])[2]["result"] == "pass"
    assert latency.evaluate_targets([size(10_000, 20), size(100_000, 27)])[2]["result"] == "FAIL"  # 1.35x
    # Measured taking turns with a copy at 10k, that figure decides, whatever the sizes' p50s say.
    paired = {"status": "measured", "growth": 1.12}
    growth = latency.evaluate_targets([size(10_000, 20), size(1_000_000, 50)], paired)[2]
    assert (
        growth["name"] == "recall p50 at the largest size (1M) / p50 at 10k, taking turns with a copy at 10k"
    )
    assert (growth["value"], growth["result"]) == (1.12, "pass")
    unmeasured = {"status": "not measured: the role may not create the copy's database"}
    growth = latency.evaluate_targets([size(10_000, 20), size(1_000_000, 50)], unmeasured)[2]
    assert (growth["value"], growth["result"]) == (2.5, "FAIL")  # the sizes' p50s, then


@pytest.mark.slow  # a whole benchmark run, end to end: make test-fast leaves it out
def test_growth_is_measured_again_taking_turns_with_a_copy_at_the_reference_size(
    bench_settings, embedder, database_url
):
    class Counting:  # the model, counting the memories it embeds
        def __init__(self, real):
            self.real, self.embedded = real, 0

        def __getattr__(self, name):
            return getattr(self.real, name)

        def embed_memories(self, texts):
            self.embedded += len(texts)
            return self.real.embed_memories(texts)

    model = Counting(embedder)
    before_copy: list[int] = []
    result = _run(
        bench_settings,
        [40, 120],
        model,
        pool=40,
        sample=16,
        reference=40,
        partial=lambda _: before_copy.append(model.embedded),
    )
    paired = result["growth_taking_turns"]
    assert paired["status"] == "measured"
    assert (paired["memories"], paired["reference"], paired["reference_stored"]) == (120, 40, 40)
    assert paired["recalls_each"] == latency.PAIRED_ROUNDS * 3
    assert paired["growth"] == pytest.approx(paired["recall_p50"] / paired["reference_p50"], abs=1e-3)
    # The copy holds the pool's texts with the vectors the store has: the model embedded none again.
    assert model.embedded == before_copy[-1]
    growth = result["targets"][2]
    assert growth["name"].endswith("taking turns with a copy at 40") and growth["value"] == paired["growth"]
    assert "taking turns with a copy" in report.latency_markdown(result)
    with psycopg.connect(database_url) as conn:  # the copy's database is gone
        left = conn.execute(
            "SELECT count(*) FROM pg_database WHERE datname LIKE 'memlane_bench_copy_%'"
        ).fetchone()[0]
    assert left == 0


@pytest.mark.slow
def test_a_role_that_may_not_create_a_database_gets_the_sizes_growth(tmp_path, embedder, external_url):
    # A managed service's application role (no CREATEDB): the copy cannot be made, and the growth
    # target reads the sizes' own p50s, as the report says.
    settings = load(data_dir=tmp_path, database={"url": external_url})
    result = _run(settings, [20, 40], embedder, queries=2, pool=20, reference=20)
    paired = result["growth_taking_turns"]
    assert paired["status"].startswith("not measured: the role may not create the copy's database")
    small, large = result["sizes"]
    growth = result["targets"][2]
    assert growth["name"] == "recall p50 at the largest size (40) / p50 at 20"
    assert growth["value"] == pytest.approx(large["recall"]["p50"] / small["recall"]["p50"], abs=1e-3)
    assert "not measured: the role may not" in report.latency_markdown(result)


def test_pool_batches_hold_one_project_each_in_stream_order():
    from memlane.bench.corpus import Item

    items = [Item(content=str(i), project="ab"[i % 3 == 0], occurred_at=None) for i in range(10)]
    batches = list(latency.by_project(items, 3))
    assert all(len({it.project for it in b}) == 1 and len(b) <= 3 for b in batches)
    assert sorted(int(it.content) for b in batches for it in b) == list(range(10))  # each once
    for b in batches:
        assert [int(it.content) for it in b] == sorted(int(it.content) for it in b)


def test_the_cli_defaults_are_the_benchmark_s_own():
    from memlane.bench import cli

    assert (cli.DEFAULT_POOL, cli.DEFAULT_CONCURRENCY) == (latency.POOL, latency.BUILD_CONCURRENCY)


# Which memory template answers each question template (corpus.MAIN and corpus.QUESTIONS, by index):
# "Who did I meet in C?" and "What did we decide about T?" are both answered by a meeting.
ANSWERED_BY = {0: 0, 1: 1, 2: 2, 3: 4, 4: 3, 5: 3, 6: 5, 7: 6}


def test_a_question_is_answered_by_its_template_with_its_values_and_nothing_else():
    from memlane.bench import corpus

    questions = Corpus(7).questions(300)
    assert {q.template for q in questions} == set(range(len(corpus.QUESTIONS)))
    filler = Corpus._slots(random.Random(3))
    for q in questions:
        values = {**filler, **dict(q.slots)}
        values["pref"] = "prefers"  # the form the question asks about
        answer = corpus.MAIN[ANSWERED_BY[q.template]]
        assert corpus.relevant(q, answer.format(**values)), (q.text, answer)
        # A memory goes on after its template's sentence (corpus.EXTRA): still an answer.
        followed = answer.format(**values) + " " + corpus.EXTRA[0].format(**values)
        assert corpus.relevant(q, followed), (q.text, followed)
        for i, other in enumerate(corpus.MAIN):
            if i != ANSWERED_BY[q.template]:
                assert not corpus.relevant(q, other.format(**values)), (q.text, other)
        # The right template with another value of what the question names is not an answer.
        for name, value in q.slots:
            pool = {
                "p": corpus.PEOPLE,
                "s": corpus.SERVICES,
                "t": corpus.TECH,
                "act": corpus.ACTIVITIES,
                "city": corpus.CITIES,
                "topic": corpus.TOPICS,
                "rel": corpus.RELATIONS,
            }[name]
            changed = next(x for x in pool if x != value and value not in x and x not in value)
            assert not corpus.relevant(q, answer.format(**{**values, name: changed})), (q.text, name)
    liked = next(q for q in questions if q.template == 1)
    values = {**filler, **dict(liked.slots), "pref": "dislikes"}
    assert not corpus.relevant(liked, corpus.MAIN[1].format(**values))


def test_what_recall_returned_is_scored_per_template():
    from memlane.bench.corpus import Query

    met = Query("Who did I meet in Oslo?", "p", 4, (("city", "Oslo"),))
    moved = Query("Why did we move billing off Kafka?", "p", 0, (("s", "billing"), ("t", "Kafka")))
    out = latency.precision([(met, [True, False, True]), (moved, [False] * 10)])
    assert out["questions"] == 2
    assert out["p@1"] == pytest.approx((1 + 0) / 2)
    assert out["p@5"] == pytest.approx((2 / 5 + 0) / 2)  # fewer than 5 returned: the rest count as misses
    assert out["by_template"]["Who did I meet in {city}?"] == {
        "questions": 1,
        "p@1": 1.0,
        "p@5": 0.4,
        "p@10": 0.2,
    }
    assert latency.precision([])["p@5"] is None


def test_the_targets_are_three_times_the_floor_and_1_3x_growth_and_the_report_applies_todays():
    """Issue 59's targets; a stored result rendered against them, whatever limits its JSON kept."""
    from memlane.bench.report import current_targets

    def size(n, p50, vs_floor, vs_embed):
        return {
            "memories": n,
            "recall": {"p50": p50},
            "recall_vs_floor": vs_floor,
            "remember_vs_embedding": vs_embed,
        }

    old = {
        "sizes": [size(10_000, 20, 2.7, 0.77), size(1_000_000, 25, 2.9, 0.71)],
        "growth_taking_turns": {"status": "measured", "growth": 1.26, "reference": 10_000},
        "targets": [
            {"name": "recall p50 / floor p50 (worst size)", "value": 2.9, "limit": "<= 2.0", "result": "FAIL"}
        ],
    }
    now = current_targets(old)
    assert [(t["limit"], t["result"]) for t in now] == [
        ("<= 3.0", "pass"),
        (">= 0.7", "pass"),
        ("<= 1.3", "pass"),
    ]
    old["sizes"][1]["recall_vs_floor"] = 3.2
    assert current_targets(old)[0]["result"] == "FAIL"
