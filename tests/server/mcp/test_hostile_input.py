"""Hostile input, property-based (hypothesis), over every tool's arguments and the stats resource:
huge strings, control characters, NUL bytes, lone surrogates, deep or huge metadata, SQL and
tsquery metacharacters, absurd limits and budgets, dates out of range or in odd formats, wrong JSON
types. In process (the engine's calls) and over MCP (the SDK's client, in memory and over
streamable HTTP against a ``memlane serve`` subprocess).

Every case must get a clear error (InvalidInput / NotFound in process; a tool error with a readable
message over MCP, never a traceback or "failed unexpectedly") or a correct result; a rejected call
leaves the store exactly as it was (a full dump of the tables before and after); after the run a
normal call still works. The counts of cases tried per tool are printed at the end of the module
(``pytest -s``) and checked to be non-trivial.
"""

from __future__ import annotations

import collections
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from mcp import Client
from support.clients import in_process
from support.dump import dump
from support.postmaster import release_embedded
from support.processes import serve, server_env

from memlane.pipeline.config import DatabaseConfig
from memlane.pipeline.errors import InvalidInput, NotFound
from memlane.pipeline.store.embedded import start_embedded
from memlane.server.settings import Settings

pytestmark = pytest.mark.anyio

TRIED: collections.Counter[str] = collections.Counter()
HYPOTHESIS = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
    derandomize=True,  # the same cases on every run: a failure here is a bug to fix, not a flake
)
IN_PROCESS = 30  # examples per tool
OVER_MCP = 20
OVER_HTTP = 10

# What a message to a client must never contain: internals instead of an explanation.
INTERNALS = ("Traceback", 'File "', "failed unexpectedly", "psycopg", "RecursionError", "OverflowError")

# -- strategies ------------------------------------------------------------------------------------

METACHARS = ["'", "&", "|", "!", ":*", "\\", "--", "''", "\\'", "%", "_", ";", "$$", "(", ")", "<->", "*"]
SPECIAL = [
    "'; DROP TABLE memories; --",
    "a:* & !b | c",
    "!!!",
    "' OR '1'='1",
    "\\\\ '' \\' :*",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\x01\x02\x1b[31m",
    "\u202e\u200b\ufeff",
    "next year",
    "yesterday at noon",
    "in 10000 years",
    "🙂" * 50,
    " ",
    "",
]


def _huge(n: int) -> str:
    return ("memory " * (n // 7 + 1))[:n]


hostile_text = st.one_of(
    st.text(max_size=40),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=30),  # surrogates, controls
    st.lists(st.sampled_from(METACHARS + ["word", " "]), max_size=12).map("".join),
    st.sampled_from(SPECIAL),
    st.sampled_from([4001, 20_000, 200_000]).map(_huge),
)
wrong_type = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
absurd_int = st.one_of(
    st.integers(-5, 300),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, -(10**30)]),
    st.booleans(),
    st.floats(allow_nan=True),
)
odd_dates = st.one_of(
    st.sampled_from(
        [
            "2024-05-08",
            "2024-05-08T13:56:00Z",
            "0001-01-01T00:00:00+14:00",
            "9999-12-31T23:59:59-14:00",
            "0001-01-01",
            "9999-12-31T23:59:59.999999",
            "10000-01-01",
            "-0001-01-01",
            "2024-02-30",
            "2024-13-01",
            "2024-W19-3",
            "20240508T135600Z",
            "2024-05-08T25:00:00",
            "8 May 2024",
            "yesterday",
            "now",
            "1715176560",
            "2024-05-08T13:56:00+99:00",
            "'; --",
            "",
        ]
    ),
    st.datetimes().map(lambda d: d.isoformat()),
    st.text(max_size=20),
)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**80), 2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    hostile_text,
)
json_value = st.recursive(
    json_leaf,
    lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(hostile_text, kids, max_size=4)),
    max_leaves=20,
)


def _nested(n: int) -> dict[str, Any]:
    d: Any = 1
    for i in range(n):
        d = {"a": d} if i % 2 else [d]
    return {"deep": d}


metadata = st.one_of(
    st.dictionaries(hostile_text, json_value, max_size=5),
    st.sampled_from([50, 99, 101, 500, 3000]).map(_nested),
    st.sampled_from([{"big": "x" * 70_000}, {str(i): i for i in range(5000)}, {"n": float("nan")}]),
    wrong_type,
)
tags = st.one_of(
    st.lists(hostile_text, max_size=5), st.lists(st.sampled_from(METACHARS), max_size=40), wrong_type
)


def maybe(strategy):
    """Absent, or the strategy's value (so each case varies a few arguments, not all)."""
    return st.one_of(st.just(_ABSENT), strategy)


_ABSENT = object()


def args_of(**fields) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({k: maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not _ABSENT}
    )


remember_args = st.fixed_dictionaries(
    {"content": st.one_of(st.text(min_size=1, max_size=60), hostile_text, wrong_type)}
).flatmap(
    lambda base: args_of(
        project=st.one_of(hostile_text, st.sampled_from(["acme", "*", "default", " acme "])),
        category=hostile_text | wrong_type,
        tags=tags,
        pinned=st.one_of(st.booleans(), wrong_type),
        priority=absurd_int,
        occurred_at=st.one_of(odd_dates, wrong_type),
        expires_at=st.one_of(odd_dates, wrong_type),
        metadata=metadata,
    ).map(lambda extra: {**base, **extra})
)
recall_args = st.fixed_dictionaries(
    {"query": st.one_of(st.text(min_size=1, max_size=60), hostile_text, wrong_type)}
).flatmap(
    lambda base: args_of(
        project=st.one_of(hostile_text, st.sampled_from(["acme", "*", "default"])),
        limit=absurd_int,
        max_tokens=absurd_int,
        budget=st.one_of(st.sampled_from(["low", "mid", "high", "max", "'"]), wrong_type),
        mode=st.one_of(st.sampled_from(["auto", "fast", "full", "slow"]), wrong_type),
        reference_time=st.one_of(odd_dates, wrong_type),
        category=hostile_text | wrong_type,
        tags=tags,
        explain=st.one_of(st.booleans(), wrong_type),
    ).map(lambda extra: {**base, **extra})
)
ids = st.one_of(
    st.just("{seed}"),  # the seeded memory's full id
    st.just("{seed8}"),  # its 8-digit handle
    st.sampled_from(["00000000", "0" * 32, "ffffffff-ffff", "urn:uuid:" + "0" * 32, "{" + "0" * 32 + "}"]),
    hostile_text,
    wrong_type,
)
update_args = st.fixed_dictionaries({"id": ids}).flatmap(
    lambda base: args_of(
        content=st.one_of(st.text(min_size=1, max_size=60), hostile_text, wrong_type),
        category=hostile_text | wrong_type,
        tags=tags,
        pinned=st.one_of(st.booleans(), wrong_type),
        priority=absurd_int,
        occurred_at=st.one_of(odd_dates, wrong_type),
        expires_at=st.one_of(odd_dates, wrong_type),
        metadata=metadata,
    ).map(lambda extra: {**base, **extra})
)
forget_args = st.fixed_dictionaries({"id": ids})
stats_uris = st.one_of(
    st.just("memlane://stats"),
    st.sampled_from(
        [
            "memlane://stats/",
            "memlane://stats?project='--",
            "memlane://../stats",
            "memlane://STATS",
            "memlane://",
        ]
    ),
    st.text(st.characters(codec="utf-8"), max_size=20).map(lambda s: "memlane://stats" + s),
)

SEED = "The release train leaves every second Thursday"

# -- the store as it is (every row of every table memlane writes) ------------------------------------


def _fill(args: dict[str, Any], seed_id: str) -> dict[str, Any]:
    if args.get("id") == "{seed}":
        return {**args, "id": seed_id}
    if args.get("id") == "{seed8}":
        return {**args, "id": seed_id[:8]}
    return args


def readable(message: str) -> None:
    assert message.strip(), "an empty error message"
    for bad in INTERNALS:
        assert bad not in message, f"internals in an error message: {message[:500]}"


# -- in process -------------------------------------------------------------------------------------


async def engine_call(engine, tool: str, args: dict[str, Any]):
    if tool == "remember":
        return await engine.remember(args)
    if tool == "recall":
        a = dict(args)
        query = a.pop("query")
        return await engine.recall(dict(query=query, **a))
    if tool == "update":
        a = dict(args)
        return await engine.update(a.pop("id"), a)
    if tool == "forget":
        return await engine.forget(args["id"])
    raise AssertionError(tool)


async def check_result(engine, tool: str, args: dict[str, Any], out) -> None:
    """An accepted call did what it says."""
    if tool == "remember":
        m = await engine.get(out.id)
        assert m.content == args["content"].strip()
        if out.status == "created" and isinstance(args.get("metadata"), dict):
            assert m.metadata == json.loads(json.dumps(args["metadata"]))
    elif tool == "recall":
        assert out.rendered["tokens_used"] <= (args.get("max_tokens") or 2000)
        project = (args.get("project") or "").strip() or "default"
        assert all(m.project == project for m, _ in out.memories)
    elif tool == "update":
        m = await engine.get(out.id)
        if isinstance(args.get("content"), str):
            assert m.content == args["content"].strip()
    elif tool == "forget":
        with pytest.raises(NotFound):
            await engine.get(out.id)


# Cases that found bugs, always tried first (hypothesis's explicit examples).
KNOWN = {
    "remember": [
        {"content": "edge", "occurred_at": "0001-01-01T00:00:00+14:00"},
        {"content": "edge", "expires_at": "9999-12-31T23:59:59-14:00"},
        {"content": "deep", "metadata": _nested(150)},
    ],
    "recall": [{"query": "what happened next year?", "reference_time": "9999-12-31T23:59:59-14:00"}],
    "update": [
        {"id": "{seed}", "occurred_at": "0001-01-01T00:00:00+14:00"},
        {"id": "{seed}", "metadata": _nested(150)},
    ],
    "forget": [{"id": "{seed8}"}],
}


def in_process_test(tool: str, strategy):
    def with_known(f):
        for case in KNOWN[tool]:
            f = example(args=case)(f)
        return f

    @settings(HYPOTHESIS, max_examples=IN_PROCESS)
    @with_known
    @given(args=strategy)
    async def test(engine, database_url, args):
        if not hasattr(engine, "hostile_seed"):  # once per test, not per example
            engine.hostile_seed = str((await engine.remember({"content": SEED, "tags": ["release"]})).id)
        args = _fill(args, engine.hostile_seed)
        TRIED[f"{tool} (in process)"] += 1
        before = dump(database_url)
        try:
            out = await engine_call(engine, tool, args)
        except (InvalidInput, NotFound) as e:
            readable(str(e))
            assert dump(database_url) == before, "a rejected call changed the store"
            return
        await check_result(engine, tool, args, out)

    test.__name__ = f"test_{tool}_in_process_answers_every_hostile_input_with_a_result_or_a_clear_error"
    return test


# In process, remember also takes what import passes: a source and a position in it.
engine_remember_args = remember_args.flatmap(
    lambda base: args_of(source=hostile_text | wrong_type, position=absurd_int).map(
        lambda extra: {**base, **extra}
    )
)
test_remember_in_process = in_process_test("remember", engine_remember_args)
test_recall_in_process = in_process_test("recall", recall_args)
test_update_in_process = in_process_test("update", update_args)
test_forget_in_process = in_process_test("forget", forget_args)


async def test_dates_an_offset_pushes_out_of_the_calendar_are_refused_not_crashed_on(engine, database_url):
    """Regression: '0001-01-01T00:00:00+14:00' is a valid ISO date whose UTC instant is in year 0;
    hashing it raised OverflowError and storing it a DataError (PostgreSQL's BC year) before."""
    seed = await engine.remember({"content": SEED})
    before = dump(database_url)
    for field, value in (
        ("occurred_at", "0001-01-01T00:00:00+14:00"),
        ("expires_at", "9999-12-31T23:59:59-14:00"),
    ):
        with pytest.raises(
            InvalidInput, match=f"{field}: .* out of range; dates must fall within the years 1 to 9999"
        ):
            await engine.remember({"content": "An edge of time", field: value})
        with pytest.raises(InvalidInput, match="out of range"):
            await engine.update(str(seed.id), {field: value})
    assert dump(database_url) == before
    # The calendar's own edges, in UTC, are fine.
    out = await engine.remember({"content": "The first day", "occurred_at": "0001-01-01T00:00:00Z"})
    assert (await engine.get(out.id)).occurred_at.year == 1


async def test_metadata_nested_past_the_limit_is_refused_and_up_to_it_is_kept(engine, database_url):
    """Regression: metadata nested ~1000 levels deep made json.dumps raise RecursionError (an
    internal error to the client); now anything deeper than METADATA_MAX_DEPTH is refused."""
    from memlane.pipeline.validate import METADATA_MAX_DEPTH

    before = dump(database_url)
    for depth in (METADATA_MAX_DEPTH + 1, 990, 5000):
        with pytest.raises(InvalidInput, match="nested more than 100 levels"):
            await engine.remember({"content": "Deep thoughts", "metadata": _nested(depth - 1)})
    assert dump(database_url) == before
    ok = _nested(METADATA_MAX_DEPTH - 1)  # {"deep": ...} adds one level
    out = await engine.remember({"content": "Deep enough", "metadata": ok})
    assert (await engine.get(out.id)).metadata == ok


# -- over MCP ---------------------------------------------------------------------------------------


async def mcp_case(client: Client, tool: str, args: dict[str, Any], dsn: str, where: str) -> None:
    """One tool call over MCP: a result, or a readable tool error with the store unchanged."""
    TRIED[f"{tool} ({where})"] += 1
    before = dump(dsn)
    try:
        r = await client.call_tool(tool, args)
    except (UnicodeEncodeError, ValueError) as e:
        # The client could not even encode the request (a lone surrogate is not UTF-8; pydantic
        # refuses to serialise thousands of levels): nothing reached the server. Counted apart.
        TRIED[f"{tool} ({where}, unsendable)"] += 1
        assert any(w in str(e).lower() for w in ("surrogate", "utf-8", "serialization depth")), e
        return
    except Exception as e:  # a protocol-level error (e.g. the SDK refusing malformed arguments)
        readable(str(e))
        assert dump(dsn) == before
        return
    if r.is_error:
        text = " ".join(getattr(c, "text", "") for c in r.content)
        readable(text)
        assert dump(dsn) == before, f"a rejected {tool} changed the store: {text[:300]}"
        return
    data = r.structured_content
    assert data is not None
    if tool == "recall":
        assert data["tokens_used"] <= (args.get("max_tokens") or 2000)


async def after_the_run_a_normal_call_works(client: Client, dsn: str, where: str) -> None:
    r = await client.call_tool(
        "remember", {"content": f"The hostile run over {where} is over", "project": "calm"}
    )
    assert r.is_error is False, r.content[0].text
    r = await client.call_tool("recall", {"query": "is the hostile run over?", "project": "calm"})
    assert r.is_error is False and r.structured_content["memories"], r.content
    stats = json.loads((await client.read_resource("memlane://stats")).contents[0].text)
    assert stats["projects"]["calm"] == 1


def in_memory_client(database_url, tmp_path, embedder):
    """An in-process client (not the ``connect`` fixture: ``settings`` here is hypothesis's)."""
    return in_process(
        Settings(data_dir=tmp_path, database=DatabaseConfig(url=database_url)), embedder=embedder
    )


STRATEGIES = {"remember": remember_args, "recall": recall_args, "update": update_args, "forget": forget_args}


@pytest.mark.parametrize("tool", list(STRATEGIES))
async def test_every_tool_over_mcp_in_memory_answers_hostile_input_with_a_result_or_a_clear_error(
    tool, database_url, tmp_path, embedder
):
    async with in_memory_client(database_url, tmp_path, embedder) as client:
        seed = (await client.call_tool("remember", {"content": SEED, "tags": ["release"]})).structured_content

        @settings(HYPOTHESIS, max_examples=OVER_MCP)
        @given(args=STRATEGIES[tool])
        def cases(args):
            cases.collected.append(_fill(args, seed["id"]))

        cases.collected = []
        cases()  # hypothesis draws the cases; they run below on this test's event loop
        for args in cases.collected:
            await mcp_case(client, tool, args, database_url, "MCP in memory")
        await after_the_run_a_normal_call_works(client, database_url, "MCP in memory")
    assert TRIED[f"{tool} (MCP in memory)"] >= OVER_MCP // 2


async def test_the_stats_resource_answers_odd_uris_with_a_clear_error(database_url, tmp_path, embedder):
    async with in_memory_client(database_url, tmp_path, embedder) as client:
        uris: list[str] = []

        @settings(HYPOTHESIS, max_examples=OVER_MCP)
        @given(uri=stats_uris)
        def draw(uri):
            uris.append(uri)

        draw()
        await client.read_resource("memlane://stats")  # the database is open and migrated
        for uri in uris:
            TRIED["stats resource (MCP in memory)"] += 1
            before = dump(database_url)
            try:
                res = await client.read_resource(uri)
            except Exception as e:  # noqa: BLE001 - an unknown resource is a protocol error
                readable(str(e))
                assert dump(database_url) == before
                continue
            data = json.loads(res.contents[0].text)
            assert data["memories"] == 0 and "schema_version" in data
        await after_the_run_a_normal_call_works(client, database_url, "MCP in memory (stats)")


# -- over streamable HTTP, against a real server process ---------------------------------------------


@pytest.fixture(scope="module")
def hostile_server():
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-test-hostile-"))
    dsn = start_embedded(data_dir)  # joined by the server; this process reads the tables directly
    try:
        with serve(server_env(data_dir), log=data_dir / "server.stderr") as server:
            yield server.url, dsn, server.proc
    finally:
        release_embedded(data_dir)


@pytest.mark.slow
async def test_every_tool_over_streamable_http_answers_hostile_input_and_the_server_survives(
    hostile_server,
):
    url, dsn, proc = hostile_server
    drawn: dict[str, list[dict[str, Any]]] = {}
    for tool, strategy in STRATEGIES.items():
        bucket = drawn[tool] = []

        @settings(HYPOTHESIS, max_examples=OVER_HTTP)
        @given(args=strategy)
        def draw(args):
            bucket.append(args)  # noqa: B023 - draw() runs right here, in this iteration

        draw()
    async with Client(url) as client:
        r = await client.call_tool("remember", {"content": SEED, "tags": ["release"]})
        assert r.is_error is False, r.content[0].text  # waits for the server's database and model
        seed = r.structured_content
        for tool, cases in drawn.items():
            for args in cases:
                await mcp_case(client, tool, _fill(args, seed["id"]), dsn, "streamable HTTP")
        await after_the_run_a_normal_call_works(client, dsn, "streamable HTTP")
    assert proc.poll() is None, "the server process died"


def teardown_module() -> None:
    print("\nhostile inputs tried per tool:")
    for key, n in sorted(TRIED.items()):
        print(f"  {key}: {n}")
