"""One memory input model: defaults and limits for a new memory, errors that say what is
accepted, a patch that keeps only what was given; and a query no later stage could read."""

from datetime import UTC, datetime, timedelta

import pytest

from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.recall.query import RecallQuery
from memlane.pipeline.remember.inputs import MemoryInput, MemoryPatch

pytestmark = pytest.mark.anyio
CFG = EngineConfig()


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
        RecallQuery.parse(engine.config, dict(query=query))


def test_memory_patch_keeps_only_what_was_given_and_refuses_project_changes():
    patch = MemoryPatch.parse(CFG, {"content": "new text", "priority": None, "pinned": False})
    assert patch.changes() == {"content": "new text", "pinned": False}
    with pytest.raises(InvalidInput, match=r"unknown updatable field\(s\) project"):
        MemoryPatch.parse(CFG, {"project": "other"})
    with pytest.raises(InvalidInput, match="nothing to update"):
        MemoryPatch.parse(CFG, {"content": None})


def test_an_expiry_in_the_past_is_refused_for_a_new_memory_and_an_update_but_restored_by_import():
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    future = datetime.now(UTC) + timedelta(days=1)
    for parse, given in ((MemoryInput.parse, {"content": "x"}), (MemoryPatch.parse, {})):
        with pytest.raises(InvalidInput, match=r"expires_at .* is in the past: a memory that has expired"):
            parse(CFG, {**given, "expires_at": past})
        with pytest.raises(InvalidInput, match="in the past"):
            parse(CFG, {**given, "expires_at": "1999-01-01"})
        assert parse(CFG, {**given, "expires_at": future.isoformat()}).expires_at == future
    # An export's memory that has expired since keeps its expiry when imported.
    restored = MemoryInput.parse(CFG, {"content": "x", "expires_at": "1999-01-01"}, restoring=True)
    assert restored.expires_at == datetime(1999, 1, 1, tzinfo=UTC)


def test_an_empty_query_asks_for_what_to_find_not_what_to_remember():
    with pytest.raises(InvalidInput, match="query is empty: ask in words what you want to find") as e:
        RecallQuery.parse(CFG, {"query": "  "})
    assert "remember" not in str(e.value)
