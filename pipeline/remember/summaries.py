"""Category summaries: per project and category, what its memories are about (``[summaries]``).

Offline, a summary is the category's key terms (its words weighted by how common they are in the
category and how rare in the project, tf-idf against the keyword arm's statistics) and an extract:
its most central memories (nearest the mean of their embeddings). With an LLM configured for the
``category_summary`` stage, ``memlane maintain --task summaries`` asks it for a short summary of
those memories instead of the extract.

Freshness: every write into a category counts as pending (a trigger, migration 0007); a reader
refreshes a summary once ``refresh_fraction`` of its category changed, offline and never on the
write path; ``memlane maintain --task summaries`` refreshes every summary with pending changes.
The scoring stage's category boost matches the question against these (``category_summaries``).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from memlane.pipeline.config import SummariesConfig
from memlane.pipeline.llm.service import LLMBudget
from memlane.pipeline.providers.llm.base import LLMError
from memlane.pipeline.words import STOPWORDS

if TYPE_CHECKING:
    from memlane.pipeline.llm.service import LLMService
    from memlane.pipeline.store import Store

log = logging.getLogger(__name__)

SAMPLE = 2000  # newest memories of a category read for its key terms
CANDIDATE_TERMS = 60  # words most frequent in the category, weighed against the project
EXTRACT_CHARS = 300  # each memory of an extract is cut to this
LLM_MEMORIES = 20  # the most central memories an LLM summarises
LLM_SUMMARY_CHARS = 1000
_WORD = re.compile(r"[a-z][a-z0-9'-]*[a-z0-9]")

# ``summarise(category, memories, key_terms)``: (summary, source) from an LLM, or None to keep the
# extract (``llm_summariser``).
Summariser: TypeAlias = Callable[[str, list[str], list[str]], Awaitable[tuple[str, str] | None]]


@dataclass(frozen=True, slots=True)
class CategorySummary:
    project: str
    category: str
    summary: str
    key_terms: tuple[str, ...]
    memory_count: int
    updated_at: datetime | None
    source: str | None  # "extract" offline, else the prompt id of the LLM's summary

    def as_dict(self) -> dict[str, Any]:
        return {
            "category": self.category,
            "memory_count": self.memory_count,
            "key_terms": list(self.key_terms),
            "summary": self.summary,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "source": self.source,
        }


def _doc_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS and "'" not in w}


async def key_terms(store: Store, project: str, contents: list[str], n: int) -> list[str]:
    """The ``n`` words that best tell this category from the rest of the project."""
    if not contents:
        return []
    df = Counter(w for c in contents for w in _doc_words(c))
    candidates = [w for w, _ in df.most_common(CANDIDATE_TERMS)]
    docs, project_df = await store.word_document_frequency(project, candidates)
    docs = max(docs, 1)

    def weight(w: str) -> float:
        return df[w] / len(contents) * math.log(1 + docs / max(project_df.get(w, 0), 1))

    return sorted(candidates, key=lambda w: (-weight(w), w))[:n]


def extract(memories: list[str]) -> str:
    cut = [m if len(m) <= EXTRACT_CHARS else m[: EXTRACT_CHARS - 1].rstrip() + "…" for m in memories]
    return " | ".join(cut)


async def refresh(
    store: Store,
    project: str,
    category: str,
    cfg: SummariesConfig,
    pending: int,
    summarise: Summariser | None = None,
) -> None:
    """Rebuild one summary. ``summarise(category, memories, key_terms)``, when given, returns
    (summary, source) from an LLM, or None to keep the extract."""
    count, sample = await store.category_sample(project, category, SAMPLE)
    terms = await key_terms(store, project, sample, cfg.key_terms) if count else []
    wanted = max(cfg.extract_memories, LLM_MEMORIES if summarise is not None else 0)
    central = await store.central_memories(project, category, wanted) if count else []
    text, source = extract(central[: cfg.extract_memories]), "extract"
    if summarise is not None and count:
        made = await summarise(category, central, terms)
        if made is not None:
            text, source = made
    await store.save_category_summary(
        project,
        category,
        summary=text,
        key_terms=terms,
        memory_count=count,
        source=source,
        pending_seen=pending,
    )


async def refresh_stale(
    store: Store, project: str | None, cfg: SummariesConfig, *, fraction: float | None = None
) -> int:
    """Refresh the summaries whose categories changed enough; returns how many."""
    stale = await store.stale_categories(project, cfg.refresh_fraction if fraction is None else fraction)
    for p, category, pending in stale:
        await refresh(store, p, category, cfg, pending)
    return len(stale)


async def category_summaries(
    store: Store, project: str, cfg: SummariesConfig | None = None
) -> list[CategorySummary]:
    """A project's category summaries, largest category first; those whose category changed by
    ``refresh_fraction`` or more since they were made are refreshed first (offline)."""
    cfg = cfg or SummariesConfig()
    await refresh_stale(store, project, cfg)
    return [
        CategorySummary(project, c, s, tuple(k), n, at, src)
        for c, s, k, n, at, src in await store.read_category_summaries(project)
    ]


def llm_summariser(service: LLMService | None) -> Summariser | None:
    """``summarise`` for ``refresh`` from the ``category_summary`` LLM stage, or None when no LLM
    is configured for it. A failed call keeps the offline extract."""
    if service is None:
        return None
    llm, _why = service.stage("category_summary")
    if llm is None:
        return None

    async def summarise(category: str, memories: list[str], terms: list[str]) -> tuple[str, str] | None:
        # Memory text is user data: each on its own line, and nothing in it can close the tag.
        lines = "\n".join("- " + " ".join(m.replace("</memories>", "").split()) for m in memories)
        try:
            answer = await llm.ask(LLMBudget(), category=category, key_terms=", ".join(terms), memories=lines)
        except LLMError as e:
            log.warning("the category_summary LLM failed for %r, keeping the extract: %s", category, e.reason)
            return None
        text = " ".join(answer.text.split())
        return (text[:LLM_SUMMARY_CHARS], answer.prompt_id) if text else None

    return summarise
