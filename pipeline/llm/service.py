"""What the LLM stages share: which provider, model and prompt version a stage uses, a cache of
stage outputs, a bound on requests in flight, the recall deadline, and token (and cost) accounting
per recall and per process.

``LLMService`` is the engine's, one per process; ``with_provider`` gives a view for one MCP session
(sampling) that shares the cache and the totals.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

from memlane.pipeline import telemetry
from memlane.pipeline.config import LLM_STAGES, LLMConfig, ModelPrice
from memlane.pipeline.llm import prompts
from memlane.pipeline.providers.llm import make_provider
from memlane.pipeline.providers.llm.base import LLM, LLMDeferred, LLMError, LLMReply


@dataclass(slots=True)
class Usage:
    """Calls and tokens, summed; ``cost`` from ``[llm.prices]`` when the model has a price."""

    calls: int = 0
    cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    priced: bool = False
    deferred: int = 0  # stages whose answer comes in a later round (MCP sampling)

    def add(self, reply: LLMReply, *, cached: bool, prices: dict[str, ModelPrice]) -> None:
        if cached:
            self.cached += 1
            return
        self.calls += 1
        self.input_tokens += reply.usage.get("input_tokens", 0)
        self.output_tokens += reply.usage.get("output_tokens", 0)
        price = prices.get(reply.model)
        if price is not None:
            self.priced = True
            self.cost += (
                reply.usage.get("input_tokens", 0) * price.input_per_mtok
                + reply.usage.get("output_tokens", 0) * price.output_per_mtok
            ) / 1e6

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "calls": self.calls,
            "cached": self.cached,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.priced:
            out["cost"] = round(self.cost, 6)
        return out


class TTLCache:
    """A small LRU with a time to live; keys are hashes of what determines an output."""

    def __init__(self, size: int, ttl_s: float) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._data: OrderedDict[str, tuple[float, LLMReply]] = OrderedDict()

    def get(self, key: str) -> LLMReply | None:
        hit = self._data.get(key)
        if hit is None:
            return None
        stamp, value = hit
        if time.monotonic() - stamp > self.ttl_s:
            del self._data[key]
            return None
        self._data.move_to_end(key)
        return value

    def put(self, key: str, value: LLMReply) -> None:
        if self.size <= 0:
            return
        self._data[key] = (time.monotonic(), value)
        self._data.move_to_end(key)
        while len(self._data) > self.size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(slots=True)
class Answer:
    text: str
    prompt_id: str
    model: str
    cached: bool
    usage: dict[str, int] = field(default_factory=dict)
    latency_ms: float = 0.0

    def detail(self) -> dict[str, Any]:
        return {"model": self.model, "cached": self.cached, "llm_ms": round(self.latency_ms, 1), **self.usage}


class AskContext(Protocol):
    """What ``StageLLM.ask`` reads of its caller: the usage its calls add to, and the time left
    (a recall's context, or ``LLMBudget`` outside a recall)."""

    @property
    def usage(self) -> Usage: ...

    def remaining_s(self) -> float | None: ...


@dataclass(slots=True)
class StageLLM:
    """One stage's provider, model and prompt."""

    service: LLMService
    stage: str
    provider: LLM
    prompt: prompts.Prompt
    model_key: str  # provider:model, part of the cache key

    async def ask(self, ctx: AskContext, **variables: str) -> Answer:
        """Render the prompt, answer from the cache or the provider before the recall's deadline;
        calls and tokens go to the recall's usage (``ctx.usage``) and the process totals."""
        usage, timeout_s = ctx.usage, ctx.remaining_s()
        system, user = self.prompt.render(**variables)
        key = hashlib.sha256(
            json.dumps([self.prompt.id, self.model_key, system, user], ensure_ascii=False).encode()
        ).hexdigest()
        svc = self.service
        provider = self.model_key.split(":", 1)[0]
        cached = svc.cache.get(key)
        if cached is not None:
            usage.add(cached, cached=True, prices=svc.cfg.prices)
            svc.totals.add(cached, cached=True, prices=svc.cfg.prices)
            telemetry.llm_call(self.stage, provider, "cached", 0.0)
            return Answer(cached.text, self.prompt.id, cached.model, True)
        if timeout_s is not None and timeout_s <= 0:
            telemetry.llm_call(self.stage, provider, "timeout", 0.0)
            raise LLMError("recall deadline passed")

        async def call() -> LLMReply:
            async with svc.semaphore():
                return await self.provider.complete(system=system, user=user)

        t0 = time.perf_counter()
        try:
            reply = await asyncio.wait_for(call(), timeout=timeout_s)
        except TimeoutError:
            telemetry.llm_call(self.stage, provider, "timeout", time.perf_counter() - t0)
            raise LLMError(f"recall deadline passed after {timeout_s:.1f} s") from None
        except LLMDeferred:
            usage.deferred += 1
            telemetry.llm_call(self.stage, provider, "deferred", time.perf_counter() - t0)
            raise
        except Exception:
            telemetry.llm_call(self.stage, provider, "error", time.perf_counter() - t0)
            raise
        if not isinstance(reply, LLMReply):
            telemetry.llm_call(self.stage, provider, "error", time.perf_counter() - t0)
            raise LLMError(f"provider returned {type(reply).__name__}, not an LLMReply")
        telemetry.llm_call(
            self.stage,
            provider,
            "ok",
            time.perf_counter() - t0,
            reply.usage.get("input_tokens", 0),
            reply.usage.get("output_tokens", 0),
        )
        usage.add(reply, cached=False, prices=svc.cfg.prices)
        svc.totals.add(reply, cached=False, prices=svc.cfg.prices)
        svc.cache.put(key, reply)
        return Answer(reply.text, self.prompt.id, reply.model, False, dict(reply.usage), reply.latency_ms)


class LLMService:
    """Per process: the providers built from ``[llm]``, the prompts, the cache and the totals.

    ``provider`` (``Engine(llm=...)``) replaces the configured default provider; a stage with its
    own ``[llm.stages.<stage>] provider`` keeps that. ``with_sampling`` gives the view of one MCP
    session, whose client model serves the stages configured for ``sampling``.
    """

    def __init__(self, cfg: LLMConfig, *, provider: LLM | None = None) -> None:
        self.cfg = cfg
        self._default = provider
        self._sampling: LLM | None = None
        self.cache = TTLCache(cfg.cache_size, cfg.cache_ttl_s)
        self.totals = Usage()
        self._sem: list[asyncio.Semaphore] = []  # shared by every view; created in the running loop
        # Every configured prompt loads and validates now: a broken template fails start-up (and
        # `memlane doctor`), not a recall.
        self.prompts = {
            stage: prompts.get(stage, getattr(cfg.stages, stage).prompt_version) for stage in LLM_STAGES
        }
        self._providers: dict[tuple[str, str | None], LLM] = {}
        for stage in LLM_STAGES:
            name, model, _, enabled = cfg.for_stage(stage)
            uses_default = getattr(cfg.stages, stage).provider is None and provider is not None
            if enabled and not uses_default and name != "sampling" and (name, model) not in self._providers:
                self._providers[(name, model)] = make_provider(name, model, cfg)

    def with_sampling(self, provider: LLM | None) -> LLMService:
        """This service as seen from one MCP session: same providers, cache and totals."""
        if provider is None:
            return self
        view = copy.copy(self)
        view._sampling = provider
        return view

    def semaphore(self) -> asyncio.Semaphore:
        if not self._sem:
            self._sem.append(asyncio.Semaphore(self.cfg.max_concurrency))
        return self._sem[0]

    @property
    def wants_sampling(self) -> bool:
        return any(self.cfg.for_stage(s)[0] == "sampling" and self.cfg.for_stage(s)[3] for s in LLM_STAGES)

    def stage(self, name: str) -> tuple[StageLLM | None, str]:
        """The stage's LLM, or None and the reason it has none (for the trace)."""
        own = getattr(self.cfg.stages, name)
        if not own.enabled:
            return None, f"llm.stages.{name}.enabled is false"
        provider_name, model, _, _ = self.cfg.for_stage(name)
        if own.provider is None and self._default is not None:
            provider = self._default
        elif provider_name == "none":
            return None, "no LLM provider"
        elif provider_name == "sampling":
            if self._sampling is None:
                return None, "sampling needs an MCP client that declares the sampling capability"
            provider = self._sampling
        else:
            provider = self._providers[(provider_name, model)]
        model_key = f"{getattr(provider, 'name', type(provider).__name__)}:{getattr(provider, 'model', '')}"
        return StageLLM(self, name, provider, self.prompts[name], model_key), ""

    def stats(self) -> dict[str, Any]:
        return {
            "provider": self.cfg.provider
            if self._default is None
            else getattr(self._default, "name", "custom"),
            "prompts": {stage: p.id for stage, p in self.prompts.items()},
            "usage": self.totals.as_dict(),
            "cache_entries": len(self.cache),
        }


_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def parse_json(text: str) -> Any:
    """The JSON value in a model's reply: the whole text, or inside a code fence, or the first
    object or array in it. Raises LLMError when there is none."""
    candidate = _FENCE.sub("", text.strip())
    try:
        return json.loads(candidate)
    except ValueError:
        pass
    for opener, closer in (("[", "]"), ("{", "}")):
        start, end = candidate.find(opener), candidate.rfind(closer)
        if 0 <= start < end:
            try:
                return json.loads(candidate[start : end + 1])
            except ValueError:
                continue
    raise LLMError(f"malformed JSON: {text.strip()[:80]!r}")


@dataclass(slots=True)
class LLMBudget:
    """What ``StageLLM.ask`` reads of its context, for a call outside a recall: the usage it adds
    to, and its time bound (None: the provider's own timeout, there is no recall deadline)."""

    usage: Usage = field(default_factory=Usage)
    timeout_s: float | None = None

    def remaining_s(self) -> float | None:
        return self.timeout_s
