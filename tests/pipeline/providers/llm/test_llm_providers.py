"""The real ``openai`` and ``anthropic`` SDK code paths against a local stand-in API on loopback
(request building, response parsing, retries, timeouts), and against the live APIs when keys are set."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr

from memlane.pipeline.config import LLMConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.providers.llm import make_provider
from memlane.pipeline.providers.llm.stub import StubLLM

pytestmark = pytest.mark.anyio

FACTS = [f"Weekly sync {i}: the team reviewed ticket number {i}" for i in range(30)] + [
    "Caroline moved to Lisbon in May 2023 for a job at a design studio"
]
QUESTION = "Where did Caroline move to and why did she go there?"


@pytest.fixture
def stub():
    with StubLLM() as s:
        yield s


async def recall_with(engine_config, embedder, llm: LLMConfig, question: str = QUESTION):
    eng = Engine(engine_config.model_copy(update={"llm": llm}), embedder=embedder)
    await eng.open()
    try:
        await eng.remember_many([{"content": f} for f in FACTS])
        return await eng.recall(dict(query=question, count_accesses=False))
    finally:
        await eng.close()


def statuses(res) -> dict[str, str]:
    return {s.stage: s.status for s in res.trace.stages}


async def test_an_openai_compatible_server_serves_every_stage(engine_config, embedder, stub):
    cfg = LLMConfig(provider="openai-compatible", base_url=stub.base_url, model="any")
    res = await recall_with(engine_config, embedder, cfg)
    st = statuses(res)
    assert [st[s] for s in ("intent", "synthesis", "hyde", "rerank")] == ["ran"] * 4
    assert res.memories[0][0].content.startswith("Caroline moved to Lisbon")
    assert len(stub.requests) == 4
    req = stub.requests[0]
    assert req["path"] == "/v1/chat/completions" and req["headers"]["authorization"] == "Bearer none"
    body = req["body"]
    assert body["model"] == "any" and body["temperature"] == 0 and body["max_tokens"] == cfg.max_output_tokens
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert res.trace.llm["calls"] == 4 and res.trace.llm["input_tokens"] > 0


async def test_the_openai_provider_sends_its_key_and_max_completion_tokens(engine_config, embedder, stub):
    cfg = LLMConfig(provider="openai", base_url=stub.base_url, api_key=SecretStr("sk-test-123"))
    res = await recall_with(engine_config, embedder, cfg)
    assert statuses(res)["rerank"] == "ran"
    req = stub.requests[-1]
    assert req["headers"]["authorization"] == "Bearer sk-test-123"
    assert req["body"]["model"] == "gpt-4o-mini" and "max_completion_tokens" in req["body"]


async def test_the_anthropic_provider_speaks_the_messages_api(engine_config, embedder, stub):
    cfg = LLMConfig(
        provider="anthropic",
        base_url=stub.anthropic_base_url,
        api_key=SecretStr("test-key"),
        model="claude-x",
    )
    res = await recall_with(engine_config, embedder, cfg)
    st = statuses(res)
    assert [st[s] for s in ("intent", "synthesis", "hyde", "rerank")] == ["ran"] * 4
    req = stub.requests[0]
    headers = req["headers"]
    assert req["path"] == "/v1/messages" and "anthropic-version" in headers
    assert headers.get("x-api-key") == "test-key" or headers.get("authorization") == "Bearer test-key"
    assert req["body"]["model"] == "claude-x" and req["body"]["system"].startswith("You are the")
    assert req["body"]["messages"][0]["role"] == "user"


async def test_server_errors_are_retried_then_degrade_each_stage(engine_config, embedder, stub):
    stub.mode = "error"
    cfg = LLMConfig(provider="openai-compatible", base_url=stub.base_url, model="any", max_retries=1)
    res = await recall_with(engine_config, embedder, cfg)
    st = statuses(res)
    for stage in ("intent", "synthesis", "hyde", "rerank"):
        assert st[stage] == "degraded: HTTP 500", (stage, st[stage])
    assert len(stub.requests) == 8  # every call tried twice
    assert res.memories[0][0].content.startswith("Caroline moved to Lisbon")


async def test_a_hanging_server_times_out_and_recall_still_answers(engine_config, embedder, stub):
    stub.mode = "hang"
    cfg = LLMConfig(
        provider="openai-compatible", base_url=stub.base_url, model="any", timeout_s=0.5, max_retries=0
    )
    res = await recall_with(engine_config, embedder, cfg)
    st = statuses(res)
    assert st["intent"] == "degraded: timeout" and st["rerank"] == "degraded: timeout"
    assert res.memories


async def test_garbage_answers_degrade_without_losing_the_recall(engine_config, embedder, stub):
    stub.mode = "garbage"
    cfg = LLMConfig(provider="openai-compatible", base_url=stub.base_url, model="any")
    res = await recall_with(engine_config, embedder, cfg)
    st = statuses(res)
    assert st["intent"].startswith("degraded: malformed JSON") and st["rerank"].startswith(
        "degraded: malformed"
    )
    # The stub's garbage is a refusal: no hypothetical memory to search with (pipeline/llm/replies.py).
    assert st["hyde"].startswith("degraded: refusal") and st["synthesis"].startswith("degraded: refusal")
    assert res.memories


def test_missing_keys_and_models_are_configuration_errors(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY or MEMLANE_LLM__API_KEY"):
        make_provider("openai", None, LLMConfig(provider="openai"))
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_provider("anthropic", None, LLMConfig(provider="anthropic"))
    with pytest.raises(ConfigError, match="needs llm.base_url"):
        make_provider("openai-compatible", "m", LLMConfig(provider="openai-compatible"))
    with pytest.raises(ConfigError, match="needs llm.model"):
        make_provider(
            "openai-compatible", None, LLMConfig(provider="openai-compatible", base_url="http://x/v1")
        )


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_live_provider_answers_every_stage(engine_config, embedder, provider):
    key = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}[provider]
    if not os.environ.get(key):
        pytest.skip(f"needs {key} (live, paid API)")
    res = await recall_with(engine_config, embedder, LLMConfig(provider=provider))
    st = statuses(res)
    assert [st[s] for s in ("intent", "synthesis", "hyde")] == ["ran"] * 3, st
    assert res.memories
