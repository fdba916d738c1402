"""Stage 5, fusion: score fusion (the default) and reciprocal rank fusion, pure functions."""

import pytest
from support.records import make_memory

from memlane.pipeline.recall import fuse
from memlane.pipeline.recall.retrieve import Retrieved
from memlane.pipeline.records import Memory


def mem(content: str) -> Memory:
    return make_memory(content)


def test_rrf_rewards_agreement_between_arms():
    a, b, c = mem("a"), mem("b"), mem("c")
    fused = fuse.reciprocal_rank_fusion(
        {"vector": [(a, 0.9), (b, 0.8)], "keyword": [(b, 2.0), (c, 1.0)]}, k=60
    )
    assert [x.memory.content for x in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].arm_scores == {"vector": 0.8, "keyword": 2.0}


def test_rrf_keeps_the_best_rank_when_a_list_repeats_a_memory():
    a = mem("a")
    fused = fuse.reciprocal_rank_fusion({"vector": [(a, 0.9), (a, 0.5)]}, k=60)
    assert len(fused) == 1 and fused[0].score == pytest.approx(1 / 61)


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


def test_neighbours_in_one_sequence_lift_each_other_from_their_unlifted_scores():
    from memlane.pipeline.records import Candidate

    def turn(name, pos, score, source="chat", project="p"):
        return Candidate(make_memory(name, source=source, position=pos, project=project), score=score)

    q, a, far, other, loose, alone = (
        turn("q", 4, 1.0),
        turn("a", 5, 0.2),  # the answer next to a strong match
        turn("far", 7, 0.5),  # two positions from a: half of a's score
        turn("other", 6, 0.3, source="another chat"),  # same position, another source: no lift
        turn("loose", 6, 0.3, project="elsewhere"),
        Candidate(make_memory("alone"), score=0.4),  # no sequence at all
    )
    cands = [q, a, far, other, loose, alone]
    assert fuse.lift_neighbours(cands, 0.5, 2) == 3
    assert a.score == pytest.approx(0.2 + 0.5 * max(1.0, 0.5 * 0.5))
    assert q.score == pytest.approx(1.0 + 0.5 * 0.2)  # from a's score before its lift
    assert far.score == pytest.approx(0.5 + 0.5 * 0.2 * 0.5)
    assert (other.score, loose.score, alone.score) == (0.3, 0.3, 0.4)
    # Off, or a window of 0: nothing moves.
    again = [turn("x", 1, 0.5), turn("y", 2, 0.1)]
    assert fuse.lift_neighbours(again, 0.0, 2) == 0 and fuse.lift_neighbours(again, 0.5, 0) == 0
    assert [c.score for c in again] == [0.5, 0.1]
