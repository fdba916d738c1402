"""The pure stages and the input checks, without a database."""

from datetime import UTC, datetime, timedelta, timezone

import pytest
from support.records import make_memory

from memlane.pipeline import validate
from memlane.pipeline.config import RecallConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall import assemble, fuse, render, threshold
from memlane.pipeline.records import Candidate, Memory
from memlane.pipeline.tokens import count_tokens


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


def test_threshold_keeps_keyword_hits_and_drops_weak_vector_only_hits():
    # Today's rule alone (the adaptive parts are in tests/pipeline/recall/test_threshold.py): a shared word keeps a
    # candidate, no shared word and a cosine under min_similarity drops it.
    cfg = RecallConfig(semantic_min_similarity=0.3, word_min_similarity=-1.0, relative_floor=0.0)
    kw = Candidate(mem("staging"), arm_scores={"keyword": 0.1, "vector": 0.01})
    weak = Candidate(mem("weak"), arm_scores={"vector": 0.05})
    strong = Candidate(mem("strong"), arm_scores={"vector": 0.4})
    kept = threshold.apply_floor([kw, weak, strong], cfg, query="staging")
    assert [c.memory.content for c in kept] == ["staging", "strong"]


def test_assembly_respects_limit_and_token_budget_and_skips_what_does_not_fit():
    long = Candidate(mem("word " * 500))
    short1, short2, short3 = (Candidate(mem(f"short fact number {i}")) for i in range(3))
    packed = assemble.pack([short1, long, short2, short3], limit=2, max_tokens=80)
    assert [c.memory.content for c in packed.chosen] == [short1.memory.content, short2.memory.content]
    assert packed.tokens_used == count_tokens(render.to_text(packed.rendered)) <= 80


def test_token_counts_match_cl100k_base():
    # "hello world" is two tokens in cl100k_base; an empty string is none.
    assert count_tokens("hello world") == 2
    assert count_tokens("") == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-08", datetime(2024, 5, 8, tzinfo=UTC)),
        ("2024-05-08T13:56:00Z", datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),
        ("2024-05-08T13:56:00+02:00", datetime(2024, 5, 8, 13, 56, tzinfo=timezone(timedelta(hours=2)))),
        ("20240508T135600", datetime(2024, 5, 8, 13, 56, tzinfo=UTC)),
    ],
)
def test_iso_dates_parse_and_naive_ones_are_utc(text, expected):
    assert validate.parse_datetime(text, "occurred_at") == expected


@pytest.mark.parametrize("bad", ["yesterday", "8 May 2023", "2024-13-01", "2024-05-08T25:00"])
def test_malformed_dates_name_the_field_and_show_the_format(bad):
    with pytest.raises(InvalidInput, match=r"occurred_at.*ISO 8601.*2024-05-08"):
        validate.parse_datetime(bad, "occurred_at")


def test_non_uuid_id_is_refused_with_an_example():
    with pytest.raises(InvalidInput, match="UUID"):
        validate.parse_id("42")


@pytest.mark.parametrize("content", ["", "   \n\t"])
def test_empty_content_is_refused(content):
    with pytest.raises(InvalidInput, match="empty"):
        validate.content_text(content, 100)


def test_too_long_content_says_the_limit_and_what_to_do():
    with pytest.raises(InvalidInput, match=r"101 characters; the maximum is 100.*Split"):
        validate.content_text("x" * 101, 100)


def test_tags_are_normalised_and_deduplicated():
    assert validate.tag_list([" UI ", "ui", "Editor", ""], 10) == ("ui", "editor")
    with pytest.raises(InvalidInput, match="list of strings"):
        validate.tag_list(5, 10)
    with pytest.raises(InvalidInput, match="at most 1"):
        validate.tag_list(["a", "b"], 1)


@pytest.mark.parametrize("bad", [0, 6, True, "3", 2.5])
def test_priority_must_be_an_integer_from_one_to_five(bad):
    with pytest.raises(InvalidInput, match="priority"):
        validate.priority_value(bad)


def test_metadata_must_be_a_json_object_within_the_size_limit():
    assert validate.metadata_object({"a": [1, {"b": None}]}, 100) == {"a": [1, {"b": None}]}
    with pytest.raises(InvalidInput, match="JSON object"):
        validate.metadata_object([1, 2], 100)
    with pytest.raises(InvalidInput, match="larger than 10 bytes"):
        validate.metadata_object({"k": "x" * 20}, 10)


def test_the_same_words_at_another_time_are_another_memory():
    t1, t2 = datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 2, tzinfo=UTC)
    assert validate.content_hash("bye", t1) != validate.content_hash("bye", t2)
    assert validate.content_hash("bye", t1) == validate.content_hash(
        "bye", t1.astimezone(timezone(timedelta(hours=5)))
    )
