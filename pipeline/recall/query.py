"""``RecallQuery``: one recall, as the recall tool, the CLI, the memory browser and the benchmarks ask
for it, checked once (``pipeline/request.py``). It is the one declaration of recall's parameters:
the tool's input schema, ``memlane recall``'s options and the browser's recall form are made from
its fields' ``Param`` (and those of ``Filters``); a parameter is added here and nowhere else.

The caller's arguments are flat (``project``, ``current_project``, ``category``, ``tags``, ...); the
query holds the current project and one ``Filters`` value, which the store's statements take whole.
``project="*"`` names every project the caller may read (``pipeline/access.py`` decides which):
``parse`` is given them as ``every_project`` (``Engine.recall`` reads them from the store when
``asks_every_project``).

``Ablation`` is the benchmark's: which retrieval arms run and whether stage 8 does. No tool has a
parameter for it, so no client can set it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar

from pydantic import Field, ValidationInfo, field_validator, model_validator

from memlane.pipeline import access
from memlane.pipeline import validate as v
from memlane.pipeline.access import ALL
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.request import FRONTS, Filters, Param, Request, config_of

BUDGETS = ("low", "mid", "high")
MODES = ("auto", "fast", "full")


@dataclass(frozen=True, slots=True)
class Ablation:
    """A recall with parts switched off, to measure what they bring (``memlane bench locomo
    --ablate``): ``arms`` (None: every registered arm, ``recall/arms.py``) and stage 8."""

    arms: tuple[str, ...] | None = None
    adjustments: bool = True


def asks_every_project(project: Any) -> bool:
    """Whether a recall's ``project`` argument is ``"*"`` (alone, or in a list)."""
    if isinstance(project, str):
        return project.strip() == ALL
    if isinstance(project, list | tuple):
        return any(isinstance(p, str) and p.strip() == ALL for p in project)
    return False


class RecallQuery(Request):
    """One recall. ``project`` is the current project (boosted in a recall across several); every
    project searched is in ``filters.projects``, the current one among them."""

    _noun: ClassVar[str] = "recall parameter"
    _what: ClassVar[str] = "a recall"

    query: Annotated[str, Param("What you want to know, in words.")]
    project: Annotated[
        str,
        Param(
            "With several projects: the one you work in (+30%; others -20%). "
            "Default: the first listed (for '*', the default project).",
            name="current_project",
            default=None,
        ),
    ]
    filters: Filters
    limit: Annotated[int, Param("At most this many memories (default 10).")] = Field(
        default=None, validate_default=True
    )  # None -> recall.default_limit
    max_tokens: Annotated[
        int,
        Param(
            "Token budget (cl100k) for this whole result as you read it (default 2000).",
            help="Token budget (cl100k) for the whole result (default 2000).",
        ),
    ] = Field(default=None, validate_default=True)  # None -> recall.default_max_tokens
    budget: Annotated[
        str,
        Param(
            "How much work recall may do: how far the graph arm expands, and the LLM stages' work.",
            choices=BUDGETS,
        ),
    ] = "mid"
    mode: Annotated[
        str,
        Param(
            "auto: simple questions take the fast path (no query synthesis, HyDE or rerank); "
            "fast; full. Default: recall.mode (auto).",
            choices=MODES,
        ),
    ] = Field(default=None, validate_default=True)  # None -> recall.mode
    reference_time: Annotated[
        datetime, Param("'Now' for relative dates, ISO 8601; default: the actual now.")
    ] = Field(default=None, validate_default=True)  # None -> now
    explain: Annotated[
        bool,
        Param("Also return full ids, scores and the pipeline trace (per-stage timings and counts)."),
    ] = False
    include_context: Annotated[
        bool,
        Param(
            "Also return each memory's previous/next neighbours in its conversation or "
            "document (within a share of max_tokens)."
        ),
    ] = False
    include_entities: Annotated[
        bool,
        Param(
            "Also return other key facts about the entities the memories mention "
            "(within a share of max_tokens)."
        ),
    ] = False
    as_of: Annotated[
        datetime | None,
        Param(
            "Answer as of this time (ISO 8601): the memories valid then come first, and a "
            "memory superseded since is not moved below its successor."
        ),
    ] = None  # recall/current.py
    include_history: Annotated[
        bool,
        Param(
            "Also return, with each memory that replaced others, its earlier versions "
            "(within a share of max_tokens)."
        ),
    ] = False  # supersession
    ablation: Ablation = Ablation()
    # Each memory returned counts an access (stage 8's access boost reads them): the assistant used
    # it. The browser and the benchmarks look without counting.
    count_accesses: bool = True

    NOT_OFFERED: ClassVar[dict[str, tuple[tuple[str, ...], str]]] = {
        "ablation": (FRONTS, "the benchmarks' switch (which arms run): no client turns recall's parts off"),
        "count_accesses": (FRONTS, "each front end's own: the tool and the CLI count, the browser looks"),
        # The recall tool's schema is what every client's model was shown (tests/data/tools_list.json):
        # a new parameter there is a change to every client, made on purpose, not by a refactoring.
        "pinned": (("mcp",), "not in the recall tool's published schema"),
        "since": (("mcp",), "not in the recall tool's published schema"),
        "until": (("mcp",), "not in the recall tool's published schema"),
        # The browser's recall page always shows the trace, and one project (its field) at a time.
        "explain": (("ui",), "the recall page always explains"),
    }
    ORDER: ClassVar[tuple[str, ...]] = (
        "query",
        "project",
        "limit",
        "max_tokens",
        "budget",
        "mode",
        "reference_time",
        "category",
        "tags",
        "topics",
        "fact_types",
        "explain",
        "current_project",
        "include_context",
        "include_entities",
        "as_of",
        "include_history",
    )

    @classmethod
    def accepted(cls) -> tuple[str, ...]:
        own = tuple(name for name in cls.model_fields if name != "filters")
        return (*own, "current_project", *(name for name in Filters.model_fields if name != "projects"))

    @property
    def searched_projects(self) -> tuple[str, ...]:
        return self.filters.projects

    @property
    def spans_projects(self) -> bool:
        return len(self.filters.projects) > 1

    def of_project(self, project: str) -> RecallQuery:
        """The same recall isolated to one of its projects (retrieval across projects runs per project)."""
        return self.model_copy(update={"project": project, "filters": self.filters.of_project(project)})

    @model_validator(mode="before")
    @classmethod
    def _arguments(cls, data: Any, info: ValidationInfo) -> Any:
        """The caller's flat arguments in the query's shape: the filters gathered into ``filters``,
        and ``project`` / ``current_project`` resolved into the current project and every project
        searched."""
        if not isinstance(data, dict) or "filters" in data:
            return data
        args = dict(data)
        filters = {name: args.pop(name) for name in list(args) if name in Filters.model_fields}
        current, filters["projects"] = _projects(
            args.pop("project", None), args.pop("current_project", None), info
        )
        return {**args, "project": current, "filters": filters}

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, value: Any, info: ValidationInfo) -> str:
        cfg = config_of(info).recall
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(
                "query is empty: ask in words what you want to find, e.g. 'the user's editor preferences'"
            )
        if len(value) > cfg.max_query_chars:
            raise InvalidInput(f"query is {len(value)} characters; the maximum is {cfg.max_query_chars}")
        return v.storable_text(value, "query").strip()

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any, info: ValidationInfo) -> int:
        cfg = config_of(info).recall
        if value is None:
            return cfg.default_limit
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= cfg.max_limit:
            raise InvalidInput(f"limit must be an integer from 1 to {cfg.max_limit}")
        return value

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _max_tokens(cls, value: Any, info: ValidationInfo) -> int:
        if value is None:
            return config_of(info).recall.default_max_tokens
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput("max_tokens must be a positive integer")
        return value

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> str:
        return v.one_of(value, "budget", BUDGETS)

    @field_validator("mode", mode="before")
    @classmethod
    def _mode(cls, value: Any, info: ValidationInfo) -> str:
        return v.one_of(config_of(info).recall.mode if value is None else value, "mode", MODES)

    @field_validator(
        "include_context", "include_entities", "include_history", "count_accesses", mode="before"
    )
    @classmethod
    def _flag(cls, value: Any, info: ValidationInfo) -> bool:
        if not isinstance(value, bool):
            raise InvalidInput(f"{info.field_name} must be true or false; got {value!r}")
        return value

    @field_validator("explain", mode="before")
    @classmethod
    def _explain(cls, value: Any) -> bool:
        return bool(value)

    @field_validator("reference_time", mode="before")
    @classmethod
    def _reference_time(cls, value: Any) -> datetime:
        return v.parse_datetime(value, "reference_time") or datetime.now(UTC)

    @field_validator("as_of", mode="before")
    @classmethod
    def _as_of(cls, value: Any) -> datetime | None:
        return v.parse_datetime(value, "as_of")

    @field_validator("ablation", mode="before")
    @classmethod
    def _ablation(cls, value: Any) -> Ablation:
        if value is None:
            return Ablation()
        if not isinstance(value, Ablation):
            raise InvalidInput("ablation must be an Ablation")
        return value


def _projects(project: Any, current_project: Any, info: ValidationInfo) -> tuple[str, tuple[str, ...]]:
    """(the current project, every project searched, the current one first unless listed). ``"*"``
    becomes the projects the caller (context ``principal``; None: the local user) may read among
    context ``every_project``, with the default project as the current one when it is among them;
    only a caller that may use every project may ask for it."""
    context = info.context or {}
    default = config_of(info).default_project
    if asks_every_project(project):
        principal = context.get("principal")
        access.check(principal, ALL)
        if isinstance(project, list | tuple) and len(project) > 1:
            raise InvalidInput("'*' already means every project: give it alone, not in a list")
        known = context.get("every_project")
        if known is None:
            raise InvalidInput("project '*' (every project) must be expanded to project names before recall")
        project = access.readable_projects(principal, known)
        if not project:
            raise InvalidInput("project '*': there is no project you may read")
        if current_project is None:
            current_project = default if default in project else project[0]
    if isinstance(project, list | tuple):
        if not project:
            raise InvalidInput("project is an empty list: give one project, a list of projects, or '*'")
        names = list(dict.fromkeys(v.project_name(p, default) for p in project))
    else:
        names = [v.project_name(project, default)]
    current = names[0] if current_project is None else v.project_name(current_project, default)
    if current == ALL:
        raise InvalidInput("current_project must be one project name, not '*'")
    if current not in names:
        names.insert(0, current)  # the current project is always searched
    return current, tuple(names)
