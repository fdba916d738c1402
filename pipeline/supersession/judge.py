"""The ``supersede`` LLM stage on the write path (optional, ``[llm.stages.supersede]``, off by default).

When it serves a write, each new short statement is shown to the ``supersede`` prompt with its
candidates: its nearest current memories of the project that share its subject
(``detect.shares_subject``, the same neighbours the offline detector reads), each with the date it
became true, numbered and escaped inside ``<memory>`` tags. For each the LLM answers replaces,
replaces in part (a memory of several facts of which some still hold: it stays current), adds to,
contradicts or unrelated; ``detect.verdict_of`` turns that into a mark ordered by valid time
(a statement dated earlier never replaces a newer one), and ``detect.pick`` keeps one predecessor.

Degrading, like every LLM stage: a provider error, a call past ``timeout_s``, a reply that is not
JSON or has no list leaves the offline detector to decide for that statement; a candidate the reply
leaves out is judged offline. A warning is logged, never the memory text.
"""

from __future__ import annotations

import asyncio
import html
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memlane.pipeline.llm.service import LLMBudget, StageLLM, parse_json
from memlane.pipeline.providers.llm.base import LLMDeferred, LLMError
from memlane.pipeline.supersession import detect

if TYPE_CHECKING:
    from memlane.pipeline.config import LLMConfig
    from memlane.pipeline.llm.service import LLMService

log = logging.getLogger(__name__)

# "replaces_part" (supersede@v2): the new statement replaces some of the facts of a stored memory
# and the others still hold, so the stored one stays current, like "adds_to".
RELATIONS = frozenset({"replaces", "replaces_part", "adds_to", "contradicts", "unrelated"})
MEMORY_CHARS = 600  # a short statement is far shorter: a longer text is cut in the prompt


def parse_reply(data: Any, count: int) -> dict[int, str]:
    """``{number: relation}`` of one reply for ``count`` candidates; malformed or out-of-range
    entries are left out. A reply without a list is an LLMError."""
    items = data.get("candidates") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise LLMError("supersede reply has no list of candidates")
    out: dict[int, str] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        n, relation = item.get("n"), item.get("relation")
        if isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= count and relation in RELATIONS:
            out[n] = relation
    return out


def _memory(text: detect.Text, n: int | None = None) -> str:
    body = text.content if len(text.content) <= MEMORY_CHARS else text.content[: MEMORY_CHARS - 1] + "…"
    number = f' n="{n}"' if n is not None else ""
    return f'<memory{number} date="{text.valid_from.date().isoformat()}">\n{html.escape(body, quote=False)}\n</memory>'


@dataclass(slots=True)
class SupersedeLLM:
    """What ``marks.mark_new`` asks instead of ``detect.decide`` (``WriteContext.supersede_llm``)."""

    llm: StageLLM
    timeout_s: float
    kept_offline: int = 0  # statements the offline detector decided because the LLM did not

    async def decide(
        self, new: detect.Text, neighbours: Sequence[tuple[detect.Text, float]]
    ) -> list[detect.Verdict]:
        """The verdicts about ``new``; never raises."""
        candidates = [(t, sim) for t, sim in neighbours if detect.shares_subject(new, t, sim)]
        candidates = sorted(candidates, key=lambda p: -p[1])[: detect.CANDIDATES]
        if not candidates:
            return []
        try:
            relations = await self._ask(new, [t for t, _ in candidates])
        except Exception as e:  # noqa: BLE001 - the offline detector decides; remember goes on
            reason = e.reason if isinstance(e, LLMError) else type(e).__name__
            log.warning("LLM supersede failed, the offline detector decides: %s", reason)
            self.kept_offline += 1
            return detect.decide(new, neighbours)
        judged = []
        for n, (old, sim) in enumerate(candidates, 1):
            relation = relations.get(n)
            v = detect.judge(new, old, sim) if relation is None else detect.verdict_of(new, old, relation)
            if v is not None:
                judged.append((v, sim))
        return detect.pick(new, judged)

    async def _ask(self, new: detect.Text, candidates: list[detect.Text]) -> dict[int, str]:
        asked = self.llm.ask(
            LLMBudget(),  # no recall deadline: this call's own bound is timeout_s
            new_memory=_memory(new),
            candidates="\n".join(_memory(t, n) for n, t in enumerate(candidates, 1)),
        )
        try:
            answer = await asyncio.wait_for(asked, timeout=self.timeout_s)
        except TimeoutError:
            raise LLMError(f"no answer within {self.timeout_s:g} s") from None
        except LLMDeferred:
            raise LLMError("the client's model answers later (sampling)") from None
        try:
            data = parse_json(answer.text)
        except LLMError:
            raise LLMError("the reply is not JSON") from None  # its text may quote a memory: not logged
        return parse_reply(data, len(candidates))


def for_write(llm: LLMService | None, cfg: LLMConfig) -> SupersedeLLM | None:
    """The write path's supersede stage, or None when it has none (no LLM, the stage disabled)."""
    if llm is None:
        return None
    stage, _why = llm.stage("supersede")
    if stage is None:
        return None
    return SupersedeLLM(stage, cfg.stages.supersede.timeout_s)
