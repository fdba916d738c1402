"""Stage 1, intent analysis: what kind of question is this, how hard, about whom and when?

Two implementations fill one record. The offline analyser (question words, capitalised names and
technical terms, time expressions, length) runs on every recall, so routing and later stages have
an intent in every mode. With an LLM, the ``intent`` prompt refines it; if that call fails the
offline record stands and the stage says ``degraded``.

Routing (``recall(mode=...)``, default ``recall.mode``): ``auto`` sends simple questions down the
fast path (the question only: no synthesis, HyDE or rerank) and the others down the full path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from memlane.pipeline.entities import extract
from memlane.pipeline.llm.service import parse_json
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.recall.context import RecallContext
from memlane.pipeline.recall.stage import Step
from memlane.pipeline.records import Query
from memlane.pipeline.time.parser import DEFAULT_RECENT_DAYS, TimeRange, find_time_expressions, parse

INTENTS = ("troubleshooting", "how-to", "factual", "recall", "preference", "temporal")
COMPLEXITIES = ("simple", "moderate", "complex")


@dataclass(frozen=True, slots=True)
class Intent:
    primary_intent: str
    complexity: str
    domains: tuple[str, ...]
    entities: tuple[str, ...]
    time_expressions: tuple[str, ...]
    requires_reasoning: bool
    source: str = "offline"  # or "llm"
    time_ranges: tuple[TimeRange, ...] = ()  # the time_expressions as ranges (pipeline/time/parser.py)

    def as_dict(self) -> dict[str, Any]:
        return {
            "primary_intent": self.primary_intent,
            "complexity": self.complexity,
            "domains": list(self.domains),
            "entities": list(self.entities),
            "time_expressions": list(self.time_expressions),
            "requires_reasoning": self.requires_reasoning,
            "source": self.source,
            "time_ranges": [r.as_dict() for r in self.time_ranges],
        }


_WORD = re.compile(r"[\w'’.-]+")
_CUES = {
    "troubleshooting": r"\b(error|errors|fail|fails|failed|failing|failure|bug|crash|crashed|broken|"
    r"fix|fixed|issue|exception|timeout|outage|incident|down|slow|regression)\b",
    "how-to": r"^\s*how\s+(do|does|to|can|should|would|did)\b|\bsteps?\s+to\b|\bhow\s+to\b",
    "preference": r"\b(prefer|prefers|preferred|preference|like|likes|favou?rite|enjoy|enjoys|love|"
    r"loves|hate|hates|want|wants|choose|chose|rather)\b",
    "recall": r"\b(did\s+(i|we|you)|have\s+(i|we)|remember|last\s+time|told|mentioned|said|"
    r"talked|discussed|decided)\b",
}
_REASONING = re.compile(
    r"\b(why|would|could|likely|might|should|compare|difference|better|worse|infer|reason|"
    r"because|if)\b",
    re.I,
)


def _entities(text: str) -> list[str]:
    """Names and technical terms, by the one extractor memories use too (``pipeline/entities.py``)."""
    return [e.name for e in extract(text)]


def analyse_offline(
    question: str, reference_time: datetime | None = None, *, recent_days: int = DEFAULT_RECENT_DAYS
) -> Intent:
    """The offline record, from cues in the words alone; with ``reference_time``, its time
    expressions as ranges too."""
    lower = question.lower()
    ranges = parse(question, reference_time, recent_days=recent_days) if reference_time else []
    times = [r.text for r in ranges] if reference_time else find_time_expressions(question)
    entities = _entities(question)
    n_words = len(_WORD.findall(question))
    if re.match(r"\s*(when|how long|what (date|day|year|month|time))\b", lower) or (
        times and re.match(r"\s*(what|which|who)\b", lower) and "happen" in lower
    ):
        primary = "temporal"
    else:
        primary = next((k for k, cue in _CUES.items() if re.search(cue, lower)), "factual")
    reasoning = bool(_REASONING.search(question))
    parts = len(re.findall(r"\b(and|or|but|then|compared|versus|vs)\b", lower)) + lower.count("?") - 1
    score = (n_words > 12) + (n_words > 22) + (len(entities) > 1) + bool(times) + reasoning + (parts > 0)
    complexity = "simple" if score == 0 else "moderate" if score <= 2 else "complex"
    return Intent(
        primary_intent=primary,
        complexity=complexity,
        domains=(),
        entities=tuple(entities),
        time_expressions=tuple(times),
        requires_reasoning=reasoning,
        time_ranges=tuple(ranges),
    )


def llm_time_ranges(
    phrases: tuple[str, ...], question: str, reference_time: datetime, recent_days: int
) -> tuple[TimeRange, ...]:
    """The LLM's time expressions read by the same parser, placed where they are in the question
    (so the temporal arm can score the rest of it); phrases the rules cannot read give no range,
    and a phrase that is part of a compound in the question gives the compound's one range."""
    out: list[TimeRange] = []
    lower = question.lower()
    whole = parse(question, reference_time, recent_days=recent_days) if question else []
    for phrase in phrases:
        at = lower.find(phrase.lower())
        for r in parse(phrase, reference_time, recent_days=recent_days):
            span = (r.span[0] + at, r.span[1] + at) if at >= 0 else (0, 0)
            # A part of a compound the question says whole ("last year" of "in March last year"):
            # the whole one, as the parser reads the question, not the union of the parts.
            outer = next(
                (w for w in whole if at >= 0 and w.span[0] <= span[0] and span[1] <= w.span[1]), None
            )
            r = outer if outer is not None else replace(r, span=span)
            if r not in out:
                out.append(r)
    return tuple(out)


def from_llm(
    data: Any,  # the LLM's JSON
    offline: Intent,
    question: str = "",
    reference_time: datetime | None = None,
    recent_days: int = 30,
) -> Intent:
    """The LLM's record, checked; fields it got wrong keep the offline value. Its time expressions
    are parsed like the offline ones; when none of them reads as a range, the offline ranges stand."""
    if not isinstance(data, dict):
        raise LLMError(f"intent is not a JSON object: {type(data).__name__}")

    def strings(key: str, fallback: tuple[str, ...]) -> tuple[str, ...]:
        value = data.get(key)
        if isinstance(value, list) and all(isinstance(x, str) for x in value):
            return tuple(x.strip() for x in value if x.strip())[:20]
        return fallback

    primary = data.get("primary_intent")
    complexity = data.get("complexity")
    if primary not in INTENTS or complexity not in COMPLEXITIES:
        raise LLMError(f"intent has primary_intent {primary!r} / complexity {complexity!r}")
    reasoning = data.get("requires_reasoning")
    times = strings("time_expressions", offline.time_expressions)
    ranges = offline.time_ranges
    if reference_time is not None and times != offline.time_expressions:
        ranges = llm_time_ranges(times, question, reference_time, recent_days) or offline.time_ranges
    return Intent(
        primary_intent=primary,
        complexity=complexity,
        domains=strings("domains", offline.domains)[:3],
        entities=strings("entities", offline.entities),
        time_expressions=times,
        requires_reasoning=reasoning if isinstance(reasoning, bool) else offline.requires_reasoning,
        source="llm",
        time_ranges=ranges,
    )


async def analyse(ctx: RecallContext, query: Query) -> Step[Query]:
    """The offline record always; the LLM's when one is configured for this stage."""
    ref, recent = ctx.request.reference_time, ctx.config.temporal.recent_days
    offline = analyse_offline(query.text, ref, recent_days=recent)
    query = replace(query, intent=offline)
    llm, why = ctx.llm.stage("intent") if ctx.llm is not None else (None, "no LLM provider")
    detail = {"intent": offline.as_dict()}
    if llm is None:
        return Step(query, detail={"implementation": f"offline ({why})", **detail})
    try:
        answer = await llm.ask(
            ctx,
            question=query.text,
            reference_time=ctx.request.reference_time.date().isoformat(),
        )
        intent = from_llm(parse_json(answer.text), offline, query.text, ref, recent)
    except LLMError as e:
        return Step(query, status=f"degraded: {e.reason}", detail=detail, prompt=llm.prompt.id)
    return Step(
        replace(query, intent=intent),
        detail={"intent": intent.as_dict(), **answer.detail()},
        prompt=answer.prompt_id,
    )
