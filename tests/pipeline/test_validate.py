"""The input checks every write and recall runs: dates, ids, content, tags, priority, metadata,
and the content hash that tells one memory from another."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memlane.pipeline import validate
from memlane.pipeline.errors import InvalidInput


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


def test_fact_types_filter_checks_every_entry():
    assert validate.fact_types_filter(["World", "opinion", "world"]) == ("world", "opinion")
    with pytest.raises(InvalidInput, match="fact_type must be one of"):
        validate.fact_types_filter(["world", "fact"])
    # A null entry would filter on fact_type = NULL, which matches no memory: refused instead.
    with pytest.raises(InvalidInput, match="fact_types must be a list of"):
        validate.fact_types_filter(["world", None])
