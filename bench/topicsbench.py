"""``memlane bench topics``: accuracy of the topic and fact-type classifiers on labelled memories.

Each file is JSON lines ``{"text", "topic", "fact_type"}`` (``tests/data/topics_labelled.jsonl`` and
``topics_heldout.jsonl``); the taxonomy file is TOML with ``[[custom_topics]]`` tables (the shape of
``[topics] custom_topics``). Topics are scored top 1 against the fixed taxonomy (taxonomy ``fixed``:
a name outside it is never accepted), fact types exactly.

Offline: the assignment ``remember`` makes without an LLM (pipeline/remember/topics.py, facttypes.py).
With ``--llm``: the same offline assignment refined by the ``topics`` LLM stage
(pipeline/remember/topics_llm.py) on the configured ``[llm]`` provider, whatever ``[llm.stages.topics]
enabled`` says, in batches as remember sends them. It needs a provider (a paid API key, an
OpenAI-compatible server, not ``sampling``), so its figures exist only where one was configured.
Nothing is stored: no database is opened.
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memlane.bench.common import versions
from memlane.pipeline.config import TopicsConfig
from memlane.pipeline.errors import ConfigError
from memlane.pipeline.remember.facttypes import classify
from memlane.pipeline.remember.inputs import MemoryInput
from memlane.pipeline.remember.topics import Topics
from memlane.pipeline.remember.topics_llm import TopicsLLM
from memlane.pipeline.validate import FACT_TYPES

if TYPE_CHECKING:
    from memlane.pipeline.llm.service import StageLLM
    from memlane.pipeline.store import Store


class _NoStore:
    """A fixed taxonomy reads no automatic topics; this says so if that ever changes."""

    async def auto_topics(self, project: str) -> list:
        raise AssertionError("bench topics scores a fixed taxonomy: no automatic topics")


def _rows(path: Path) -> list[dict[str, str]]:
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise ConfigError(f"{path}:{n}: not JSON") from None
        if not isinstance(row, dict) or not all(isinstance(row.get(k), str) for k in ("text", "topic")):
            raise ConfigError(f'{path}:{n}: a row is {{"text": ..., "topic": ..., "fact_type": ...}}')
        if row.get("fact_type") not in FACT_TYPES:
            raise ConfigError(f"{path}:{n}: fact_type must be one of {', '.join(FACT_TYPES)}")
        rows.append(row)
    if not rows:
        raise ConfigError(f"{path}: no labelled rows")
    return rows


def _taxonomy(path: Path) -> list:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: {e}") from None
    topics = data.get("custom_topics")
    if not topics:
        raise ConfigError(f"{path}: no [[custom_topics]] tables")
    return topics


def _score(rows, topics: list[tuple[str, ...]], kinds: list[str]) -> dict[str, float]:
    n = len(rows)
    return {
        "topic": round(sum(t[:1] == (r["topic"],) for r, t in zip(rows, topics, strict=True)) / n, 4),
        "fact_type": round(sum(k == r["fact_type"] for r, k in zip(rows, kinds, strict=True)) / n, 4),
    }


async def run(
    settings, files: list[Path], taxonomy: Path, *, llm: bool = False, provider=None, embedder=None
) -> dict[str, Any]:
    """The report. ``provider`` replaces the configured LLM provider (tests); ``embedder``: a loaded
    one to reuse."""
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.providers.embedding import make_embedder

    cfg = settings.engine()
    topics_cfg = TopicsConfig(
        **{
            **cfg.topics.model_dump(),
            "enabled": True,
            "taxonomy": "fixed",
            "custom_topics": _taxonomy(taxonomy),
        }
    )
    refiner = None
    stage: StageLLM | None = None  # with --llm, the topics stage's model (or a ConfigError)
    if llm:
        stages = cfg.llm.stages.model_copy(
            update={"topics": cfg.llm.stages.topics.model_copy(update={"enabled": True})}
        )
        llm_cfg = cfg.llm.model_copy(update={"stages": stages})
        stage, why = LLMService(llm_cfg, provider=provider).stage("topics")
        if stage is None:
            raise ConfigError(
                f"bench topics --llm needs an LLM provider ({why}): set [llm] provider and its key, "
                "e.g. MEMLANE_LLM__PROVIDER=anthropic ANTHROPIC_API_KEY=..."
            )
        timeout = llm_cfg.stages.topics.timeout_s
    if embedder is None:
        embedder = make_embedder(cfg.embedding)
        embedder.load()
    topics = Topics(topics_cfg, embedder)
    fixed = topics.fixed()
    report: dict[str, Any] = {
        "benchmark": "topics",
        "taxonomy": taxonomy.name,
        "topics": [t.name for t in fixed],
        "versions": await versions(),
        "files": {},
    }
    if stage is not None:
        report["llm"] = {"provider": stage.model_key, "prompt": stage.prompt.id}
    for path in files:
        rows = _rows(path)
        texts = [r["text"] for r in rows]
        vectors = embedder.embed_batch(texts)
        offline = [topics.assign(t, v, fixed, [], learn=False) for t, v in zip(texts, vectors, strict=True)]
        kinds = [classify(t) for t in texts]
        entry: dict[str, Any] = {
            "memories": len(rows),
            "offline": _score(rows, [a.topics for a in offline], kinds),
        }
        if stage is not None:
            refiner = TopicsLLM(stage, topics, timeout)
            before = stage.service.totals.as_dict()
            inputs = [MemoryInput.parse(cfg, {"content": t}) for t in texts]
            started = time.perf_counter()
            # Not a Store: the refiner reads only auto_topics, and not for a fixed taxonomy.
            no_store = cast("Store", _NoStore())
            refined_inputs, refined = await refiner(no_store, inputs, vectors, offline)
            seconds = time.perf_counter() - started
            after = stage.service.totals.as_dict()
            entry["llm"] = {
                **_score(
                    rows,
                    [a.topics for a in refined],
                    [m.fact_type or k for m, k in zip(refined_inputs, kinds, strict=True)],
                ),
                "kept_offline": refiner.kept_offline,
                "calls": after["calls"] - before["calls"],
                "input_tokens": after["input_tokens"] - before["input_tokens"],
                "output_tokens": after["output_tokens"] - before["output_tokens"],
                "seconds": round(seconds, 2),
            }
        report["files"][path.name] = entry
    return report


def markdown(report: dict[str, Any]) -> str:
    llm = "llm" in report
    head = "| set | memories | topic (top 1) | fact type |"
    rule = "|---|---|---|---|"
    if llm:
        head += " topic, LLM | fact type, LLM | kept offline | calls | tokens in/out |"
        rule += "---|---|---|---|---|"
    lines = [
        f"### Topics and fact types ({report['taxonomy']}: {', '.join(report['topics'])})",
        "",
        head,
        rule,
    ]
    for name, e in report["files"].items():
        row = f"| {name} | {e['memories']} | {e['offline']['topic']:.2f} | {e['offline']['fact_type']:.2f} |"
        if llm:
            x = e["llm"]
            row += (
                f" {x['topic']:.2f} | {x['fact_type']:.2f} | {x['kept_offline']} | {x['calls']} |"
                f" {x['input_tokens']}/{x['output_tokens']} |"
            )
        lines.append(row)
    if llm:
        lines += ["", f"LLM: {report['llm']['provider']}, prompt {report['llm']['prompt']}."]
    return "\n".join(lines) + "\n"
