"""LLM topic names and fact types on the write path (optional, ``[llm.stages.topics]``).

The offline assignment (``topics.py``, ``facttypes.py``) always runs first. When an LLM serves the
``topics`` stage (``enabled = true``; off by default: it is one LLM call per remembered batch), the
batch's memories are shown to the ``topics`` prompt, numbered and escaped inside ``<memory>`` tags,
up to ``BATCH`` memories a call (fewer when ``[llm] max_output_tokens`` is small: ``batch_size``;
calls for larger batches run side by side, bounded by ``[llm] max_concurrency``), with the
project's automatic topic names and, with taxonomy ``fixed`` or ``hybrid``, the fixed ones. For
each memory it answers topic names and a fact type, which refine the offline assignment:

- ``fact_type``: the LLM's, unless the caller gave one (the caller's always wins) or the offline
  cues read an instruction or a preference (``facttypes.instruction_type``).
- ``topics``: names are normalised (lower case, spaces collapsed, no control characters, at most
  ``MAX_NAME_CHARS`` characters and ``MAX_NAME_WORDS`` words; others are dropped), at most
  ``max_topics_per_entry`` of them. A fixed topic's name is accepted as that fixed topic. With
  taxonomy ``fixed`` nothing else is. With ``auto`` or ``hybrid`` an existing automatic topic's name
  joins it and a new name makes a new automatic topic, exactly as the offline path does (the memory's
  embedding goes into its centroid sum in ``memlane_topics``; key terms from the memory), unless the
  project already has ``max_auto_topics``. When none of the LLM's names is accepted the offline
  topics stay. The first topic becomes the category when the caller gave none (write.py).

Degrading: a provider error, a call past ``[llm.stages.topics] timeout_s``, a reply that is not
JSON, or a memory missing from the reply keeps the offline assignment for the memories concerned;
a warning is logged (never the memory text) and the memories are stored all the same.
"""

from __future__ import annotations

import asyncio
import html
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

from memlane.pipeline.llm.service import LLMBudget, StageLLM, parse_json
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.remember import facttypes
from memlane.pipeline.remember.topics import Assignment, Topics, key_terms
from memlane.pipeline.validate import FACT_TYPES

if TYPE_CHECKING:
    from memlane.pipeline.config import LLMConfig
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.remember.inputs import MemoryInput
    from memlane.pipeline.store import Store

log = logging.getLogger(__name__)

BATCH = 20  # memories per LLM call at most
TOKENS_PER_MEMORY = 32  # reply tokens one memory's entry may take: fewer per call under a small
# [llm] max_output_tokens (512, the default, gives 16), so a reply is not cut off mid-JSON
MAX_NAME_CHARS = 64  # as recall's topics filter and [topics] custom_topics names
MAX_NAME_WORDS = 6
MEMORY_CHARS = 2000  # each memory's text is cut to this in the prompt
EXISTING_LIMIT = 200  # automatic topic names shown, the largest first
_EDGE = " \t.,;:!?'\"`-_/\\|*#()[]{}<>"

# {memory index: (topic names, fact type or None)}: what the LLM answered for each memory.
Answers: TypeAlias = dict[int, tuple[tuple[str, ...], str | None]]


def normalise_name(value: Any) -> str | None:
    """A topic name as stored, or None when the LLM's value cannot be one."""
    if not isinstance(value, str):
        return None
    text = "".join(ch if ch.isprintable() else " " for ch in value)
    name = " ".join(text.split()).strip(_EDGE).lower()
    if not name or len(name) > MAX_NAME_CHARS or len(name.split()) > MAX_NAME_WORDS:
        return None
    if not re.search(r"\w", name):
        return None
    return name


def parse_reply(data: Any, count: int) -> Answers:
    """``{number: (topic names, fact type or None)}`` of one reply for ``count`` memories. Entries
    that are malformed or out of range are left out (those memories keep their offline answer);
    a reply that is not a JSON object or list is an LLMError."""
    items = data.get("memories") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise LLMError("topics reply has no list of memories")
    out: Answers = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        n = item.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= count or n in out:
            continue
        raw = item.get("topics")
        raw = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
        names = tuple(dict.fromkeys(x for x in (normalise_name(t) for t in raw) if x))
        kind = item.get("fact_type")
        kind = kind.strip().lower() if isinstance(kind, str) else None
        out[n] = (names, kind if kind in FACT_TYPES else None)
    return out


def batch_size(max_output_tokens: int) -> int:
    """Memories per call: ``BATCH``, or fewer when the reply's token limit could not hold them."""
    return max(1, min(BATCH, max_output_tokens // TOKENS_PER_MEMORY))


def _memories(contents: list[str]) -> str:
    def cut(text: str) -> str:
        return text if len(text) <= MEMORY_CHARS else text[: MEMORY_CHARS - 1] + "…"

    return "\n".join(
        f'<memory n="{n}">\n{html.escape(cut(c), quote=False)}\n</memory>' for n, c in enumerate(contents, 1)
    )


def _names(names: list[str]) -> str:
    return html.escape(", ".join(names), quote=False) if names else "(none)"


@dataclass(slots=True)
class TopicsLLM:
    """What ``write.store_inputs`` calls after the offline assignment (``WriteContext.topics_llm``)."""

    llm: StageLLM
    topics: Topics
    timeout_s: float
    kept_offline: int = 0  # memories this object left with their offline topics (no accepted answer)

    async def __call__(
        self, store: Store, inputs: list[MemoryInput], vectors: list[list[float]], assigned: list[Assignment]
    ) -> tuple[list[MemoryInput], list[Assignment]]:
        """(inputs, assignments), refined where the LLM answered; never raises."""
        try:
            return await self._refine(store, inputs, vectors, assigned)
        except Exception as e:  # noqa: BLE001 - the offline assignment stands; remember goes on
            log.warning("LLM topics skipped, offline topics kept: %s", type(e).__name__)
            self.kept_offline += len(inputs)
            return inputs, assigned

    async def _ask(
        self, indices: list[int], inputs: list[MemoryInput], existing: list[str], fixed: list[str]
    ) -> Answers:
        asked = self.llm.ask(
            LLMBudget(),  # no recall deadline: this call's own bound is timeout_s
            memories=_memories([inputs[i].content for i in indices]),
            existing_topics=_names(existing),
            fixed_topics=_names(fixed),
            max_topics=str(self.topics.cfg.max_topics_per_entry),
        )
        try:
            answer = await asyncio.wait_for(asked, timeout=self.timeout_s)
        except TimeoutError:
            raise LLMError(f"no answer within {self.timeout_s:g} s") from None
        try:
            data = parse_json(answer.text)
        except LLMError:
            raise LLMError("the reply is not JSON") from None  # its text may quote a memory: not logged
        return {indices[n - 1]: v for n, v in parse_reply(data, len(indices)).items()}

    async def _refine(
        self, store: Store, inputs: list[MemoryInput], vectors: list[list[float]], assigned: list[Assignment]
    ) -> tuple[list[MemoryInput], list[Assignment]]:
        cfg = self.topics.cfg
        fixed = [t.name for t in cfg.custom_topics] if cfg.taxonomy != "auto" else []
        by_project: dict[str, list[int]] = {}
        for i, m in enumerate(inputs):
            by_project.setdefault(m.project, []).append(i)
        # The automatic topics as stored (this batch's offline ones are not, and are not offered).
        existing: dict[str, dict[str, tuple[str, ...]]] = {}
        offered: dict[str, list[str]] = {}
        for p in by_project:
            rows = await store.auto_topics(p) if cfg.taxonomy != "fixed" else []
            existing[p] = {name: tuple(terms) for name, _vec, _n, terms in rows}
            largest = sorted(rows, key=lambda r: (-r[2], r[0]))[:EXISTING_LIMIT]
            offered[p] = [r[0] for r in largest if r[0] not in fixed]
        size = batch_size(self.llm.service.cfg.max_output_tokens)
        chunks = [(p, idx[k : k + size]) for p, idx in by_project.items() for k in range(0, len(idx), size)]
        # Each call's timeout starts when it may go out: at most [llm] max_concurrency at once.
        gate = asyncio.Semaphore(self.llm.service.cfg.max_concurrency)

        async def ask(p: str, idx: list[int]) -> Answers:
            async with gate:
                return await self._ask(idx, inputs, offered[p], fixed)

        replies = await asyncio.gather(*(ask(p, idx) for p, idx in chunks), return_exceptions=True)
        answers: Answers = {}
        for (_, idx), reply in zip(chunks, replies, strict=True):
            if isinstance(reply, BaseException):
                if not isinstance(reply, Exception):
                    raise reply
                reason = reply.reason if isinstance(reply, LLMError) else type(reply).__name__
                log.warning("LLM topics failed for %d memories, offline topics kept: %s", len(idx), reason)
                continue
            answers.update(reply)
            if len(reply) < len(idx):
                log.warning(
                    "LLM topics reply left out %d of %d memories, offline topics kept for them",
                    len(idx) - len(reply),
                    len(idx),
                )
        if not answers:
            self.kept_offline += len(inputs)
            return inputs, assigned

        fixed_set = set(fixed)
        created: dict[str, dict[str, tuple[str, ...]]] = {p: {} for p in by_project}
        out_inputs: list[MemoryInput] = []
        out_assigned: list[Assignment] = []
        moved = False
        for i, (m, offline) in enumerate(zip(inputs, assigned, strict=True)):
            answer = answers.get(i)
            refined: Assignment | None = None
            if answer is not None:
                names, kind = answer
                refined = self._accept(names, m.content, fixed_set, existing[m.project], created[m.project])
                # The caller's fact type wins, and so does an instruction or preference read offline: the prompt
                # (topics@v1) knows only world, experience and opinion.
                if kind is not None and m.fact_type is None and facttypes.instruction_type(m.content) is None:
                    m = m.model_copy(update={"fact_type": kind})
            if refined is None:
                refined = offline
                self.kept_offline += 1
                for name, terms in offline.auto:  # topics the offline path made count to the cap
                    if name not in existing[m.project]:
                        created[m.project].setdefault(name, terms)
            moved = moved or refined.auto != offline.auto
            out_inputs.append(m)
            out_assigned.append(refined)
        if moved:  # the cached centroids took the offline assignment: read them again next time
            self.topics.forget_cache(set(by_project))
        return out_inputs, out_assigned

    def _accept(
        self,
        names: tuple[str, ...],
        content: str,
        fixed: set[str],
        existing: dict[str, tuple[str, ...]],
        created: dict[str, tuple[str, ...]],
    ) -> Assignment | None:
        """The memory's assignment from the LLM's names, or None when no name is accepted."""
        cfg = self.topics.cfg
        chosen: list[str] = []
        auto: list[tuple[str, tuple[str, ...]]] = []
        for name in names:
            if len(chosen) >= cfg.max_topics_per_entry:
                break
            if name in fixed:
                chosen.append(name)
                continue
            if cfg.taxonomy == "fixed":
                continue  # only the fixed taxonomy's names
            terms = existing.get(name, created.get(name))
            if terms is None:
                if len(existing) + len(created) >= cfg.max_auto_topics:
                    continue
                terms = tuple(key_terms(content)) or tuple(name.split())
                created[name] = terms
            chosen.append(name)
            auto.append((name, terms))
        if not chosen:
            return None
        return Assignment(tuple(chosen), tuple(auto))


def for_write(llm: LLMService | None, topics: Topics, cfg: LLMConfig) -> TopicsLLM | None:
    """The write path's topics stage, or None when it has none (no LLM, the stage disabled, topics
    off)."""
    if llm is None or not topics.enabled:
        return None
    stage, _why = llm.stage("topics")
    if stage is None:
        return None
    return TopicsLLM(stage, topics, cfg.stages.topics.timeout_s)
