"""The LLM stages as an MCP client meets them: MCP sampling through the SDK's Client (in-process,
stdio, streamable HTTP), a client without the sampling capability, and `memlane serve` pointed at
an OpenAI-compatible endpoint by environment variables, answering well, garbage, 500s or hanging."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import CreateMessageRequestParams, CreateMessageResult, ErrorData, TextContent
from support.clients import in_process
from support.processes import server_env, stdio_params

from memlane.pipeline.config import DatabaseConfig, LLMConfig
from memlane.pipeline.providers.llm.stub import StubLLM, canned_reply, stage_of
from memlane.server.settings import load

pytestmark = pytest.mark.anyio

FILLER = [f"Weekly sync {i}: the team reviewed ticket number {i}" for i in range(30)]
FACT = "Caroline moved to Lisbon in May 2023 for a job at a design studio"
QUESTION = "Where did Caroline move to and why did she go there?"
LLM_STAGES = ("intent", "synthesis", "hyde", "rerank")


class ClientModel:
    """A sampling callback that answers like a model would, and remembers what it was asked."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.requests: list[CreateMessageRequestParams] = []

    async def __call__(self, context, params: CreateMessageRequestParams):
        self.requests.append(params)
        if self.refuse:
            return ErrorData(code=-1, message="the user declined")
        user = params.messages[-1].content.text
        text = canned_reply(stage_of(params.system_prompt or ""), user)
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text), model="client-model"
        )


def by_stage(structured: dict) -> dict[str, dict]:
    return {s["stage"]: s for s in structured["trace"]["stages"]}


async def fill(client: Client) -> None:
    for content in [*FILLER, FACT]:
        r = await client.call_tool("remember", {"content": content})
        assert r.is_error is False, r.content[0].text


def in_process_with_sampling(database_url, tmp_path, embedder, **client_kw):
    settings = load(
        None, data_dir=tmp_path, database=DatabaseConfig(url=database_url), llm=LLMConfig(provider="sampling")
    )
    return in_process(settings, embedder=embedder, **client_kw)


@pytest.mark.parametrize(
    "mode", ["auto", "legacy"], ids=["2026-07-28 input-required rounds", "handshake mid-call"]
)
async def test_sampling_runs_every_llm_stage_on_the_clients_model(database_url, tmp_path, embedder, mode):
    model = ClientModel()
    async with in_process_with_sampling(
        database_url, tmp_path, embedder, sampling_callback=model, mode=mode
    ) as client:
        await fill(client)
        r = await client.call_tool("recall", {"query": QUESTION, "explain": True})
    assert r.is_error is False, r.content[0].text
    st = by_stage(r.structured_content)
    for stage in LLM_STAGES:
        assert st[stage]["status"] == "ran", st[stage]
        assert st[stage]["detail"]["prompt"].startswith(f"{stage}@v1#")
        assert st[stage]["detail"]["model"] == "client-model"
    assert len(model.requests) == 4
    prefs = model.requests[0].model_preferences
    assert prefs is not None and prefs.speed_priority == 0.8
    assert r.structured_content["memories"][0]["content"] == FACT


async def test_a_client_without_sampling_gets_the_offline_recall_and_is_told_why(
    database_url, tmp_path, embedder
):
    async with in_process_with_sampling(database_url, tmp_path, embedder) as client:
        await fill(client)
        r = await client.call_tool("recall", {"query": QUESTION, "explain": True})
    st = by_stage(r.structured_content)
    for stage in ("synthesis", "hyde", "rerank"):
        assert (
            st[stage]["status"]
            == "skipped: sampling needs an MCP client that declares the sampling capability"
        )
    assert st["intent"]["detail"]["implementation"].startswith("offline (sampling needs")
    assert r.structured_content["memories"][0]["content"] == FACT


async def test_a_handshake_client_that_refuses_sampling_degrades_the_stages(database_url, tmp_path, embedder):
    refusing = ClientModel(refuse=True)
    async with in_process_with_sampling(
        database_url, tmp_path, embedder, sampling_callback=refusing, mode="legacy"
    ) as client:
        await fill(client)
        r = await client.call_tool("recall", {"query": QUESTION, "explain": True})
    st = by_stage(r.structured_content)
    for stage in LLM_STAGES:
        assert st[stage]["status"].startswith("degraded: the client refused sampling"), st[stage]
    assert r.structured_content["memories"][0]["content"] == FACT


async def test_on_2026_07_28_a_refusal_is_the_clients_error_and_the_server_keeps_serving(
    database_url, tmp_path, embedder
):
    from mcp.shared.exceptions import MCPError

    async with in_process_with_sampling(
        database_url, tmp_path, embedder, sampling_callback=ClientModel(refuse=True)
    ) as client:
        await fill(client)
        with pytest.raises(MCPError, match="the user declined"):
            await client.call_tool("recall", {"query": QUESTION})
        r = await client.call_tool("remember", {"content": "Still here after a refused sampling"})
        assert r.is_error is False


@pytest.fixture
def data_dir():
    """Outside pytest's tmp dir, which is private to root: the embedded server runs as another user."""
    path = Path(tempfile.mkdtemp(prefix="memlane-llm-"))
    yield path / "data"
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.slow
async def test_sampling_round_trip_over_stdio_and_streamable_http(data_dir, tmp_path, http_server):
    env = server_env(data_dir, MEMLANE_LLM__PROVIDER="sampling")
    model = ClientModel()
    async with Client(stdio_params(env=env), sampling_callback=model) as client:
        await fill(client)
        r = await client.call_tool("recall", {"query": QUESTION, "explain": True})
    assert all(by_stage(r.structured_content)[s]["status"] == "ran" for s in LLM_STAGES)
    http_model = ClientModel()
    server = http_server(env, log=tmp_path / "http.stderr")
    # The server loads its model in the background, as long as recall's whole deadline on a cold
    # start: the round trip under test is the sampling, so its first recall waits for the model.
    server.wait_for_log("loaded embedding model")
    async with Client(server.url, sampling_callback=http_model) as client:
        r = await client.call_tool("recall", {"query": QUESTION, "explain": True})
    st = by_stage(r.structured_content)
    assert all(st[s]["status"] == "ran" for s in LLM_STAGES), st
    assert len(http_model.requests) == 4
    assert r.structured_content["memories"][0]["content"] == FACT


@pytest.mark.slow
async def test_serve_with_an_openai_compatible_endpoint_from_the_environment(data_dir):
    """Exactly as the issue runs it from outside, then with the endpoint misbehaving."""
    with StubLLM() as stub:
        env = server_env(
            data_dir,
            MEMLANE_LLM__PROVIDER="openai-compatible",
            MEMLANE_LLM__BASE_URL=stub.base_url,
            MEMLANE_LLM__MODEL="any",
            MEMLANE_LLM__TIMEOUT_S="1",
            MEMLANE_LLM__MAX_RETRIES="0",
        )
        async with Client(stdio_params(env=env)) as client:
            await fill(client)
            r = await client.call_tool("recall", {"query": QUESTION, "explain": True})
            st = by_stage(r.structured_content)
            for stage in LLM_STAGES:
                assert st[stage]["status"] == "ran", st[stage]
                assert st[stage]["detail"]["prompt"].startswith(f"{stage}@v1#")
            assert r.structured_content["memories"][0]["content"] == FACT
            stats = json.loads((await client.read_resource("memlane://stats")).contents[0].text)
            assert stats["llm"]["usage"]["calls"] == 4
            for mode, question in [
                ("garbage", "Why did Caroline go to Lisbon, and when exactly?"),
                ("error", "Which city did Caroline move to in 2023 and for what job?"),
                ("hang", "What job took Caroline to Lisbon and in which month?"),
            ]:
                stub.mode = mode
                r = await client.call_tool("recall", {"query": question, "explain": True})
                assert r.is_error is False, r.content[0].text
                st = by_stage(r.structured_content)
                assert st["intent"]["status"].startswith("degraded: "), (mode, st["intent"])
                assert st["rerank"]["status"].startswith("degraded: "), (mode, st["rerank"])
                assert r.structured_content["memories"][0]["content"] == FACT, mode
