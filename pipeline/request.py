"""Request values: what a caller asks of the engine, checked once, in one declaration per operation.

``Request`` is the base of every one of them (``MemoryInput`` and ``MemoryPatch`` in
``remember/inputs.py``, ``RecallQuery`` in ``recall/query.py``, and ``Filters`` here): a frozen
pydantic model whose fields run memlane's own checks (``validate.py``) before pydantic's type
check, built by ``parse`` with the configured limits. An MCP tool's signature names the same
fields, so a parameter is written in the tool and in its model and nowhere else.

Errors are ``InvalidInput`` with the message of the check that failed, so every entry point (the
tools, the CLI, import, the memory browser) tells the caller the same thing in the same words.

``Filters`` is what a memory must be to be read: the store's statements take it whole (their SQL
is ``store/filters.py``) and recall's Python arms admit their hits with ``Filters.admits``, so a
filter is added to this class, to that SQL and to ``admits``.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from memlane.pipeline import validate as v
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.records import Memory


def config_of(info: ValidationInfo) -> EngineConfig:
    """The configuration a ``parse`` call validates against (its limits)."""
    cfg = (info.context or {}).get("config")
    return cfg if cfg is not None else EngineConfig()


class Request(BaseModel):
    """A request's fields; a subclass declares them with their checks (``mode="before"`` field
    validators, so the message is memlane's) and callers build it with ``parse``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    _noun: ClassVar[str] = "field"  # what an unknown key is called in the error
    _what: ClassVar[str] = "a request"  # what the whole value is, in the error for a non-object

    @classmethod
    def accepted(cls) -> tuple[str, ...]:
        """The keys a caller may give."""
        return tuple(cls.model_fields)

    @classmethod
    def parse(cls, config: EngineConfig, data: Any, **context: Any) -> Self:
        """Validate ``data`` (a dict of the accepted keys) against the configured limits; raises
        ``InvalidInput``. ``context`` is handed to the validators beside the configuration."""
        if isinstance(data, cls):
            return data
        if not isinstance(data, dict):
            raise InvalidInput(f"{cls._what} must be a JSON object, not {type(data).__name__}")
        accepted = cls.accepted()
        unknown = sorted(set(data) - set(accepted))
        if unknown:
            raise InvalidInput(
                f"unknown {cls._noun}(s) {', '.join(unknown)}; accepted: {', '.join(accepted)}"
            )
        ctx: dict[str, Any] = {**context, "config": config, "redacted": Counter()}
        try:
            parsed = cls.model_validate(data, context=ctx)
        except ValidationError as e:
            raise invalid(e) from None
        parsed._parsed(ctx)
        return parsed

    def _parsed(self, context: dict[str, Any]) -> None:
        """What a subclass keeps of the validation's context (``MemoryInput``: its redactions)."""


def invalid(e: ValidationError) -> InvalidInput:
    """The first failure, in memlane's words when one of its checks raised it."""
    err = e.errors()[0]
    original = (err.get("ctx") or {}).get("error")
    if isinstance(original, InvalidInput):
        return original
    field = ".".join(str(p) for p in err["loc"]) or "input"
    return InvalidInput(f"{field}: {err['msg']}")


class Filters(Request):
    """What a memory must be to be read, every condition at once (all must hold)."""

    _noun: ClassVar[str] = "filter"
    _what: ClassVar[str] = "filters"

    # The projects read; a store statement reads one (``project``): a recall across several runs
    # its retrieval once per project.
    projects: tuple[str, ...] = ()
    category: str | None = None
    tags: tuple[str, ...] = ()  # all of them
    topics: tuple[str, ...] = ()  # at least one of them
    fact_types: tuple[str, ...] = ()  # one of them
    pinned: bool | None = None
    # When it happened (occurred_at, else when it was stored): since inclusive, until exclusive.
    since: datetime | None = None
    until: datetime | None = None

    @property
    def project(self) -> str:
        """The one project of a statement's filters."""
        if len(self.projects) != 1:
            raise ValueError(f"a statement reads one project, not {len(self.projects)}")
        return self.projects[0]

    def of_project(self, project: str) -> Filters:
        return self.model_copy(update={"projects": (project,)})

    def admits(self, m: Memory, now: datetime) -> bool:
        """Whether a live memory passes: what ``store/filters.py`` says in SQL, for the memories an
        arm found without it (the graph arm's neighbours)."""
        if m.project not in self.projects or (m.expires_at is not None and m.expires_at <= now):
            return False
        if self.category is not None and m.category != self.category:
            return False
        if self.tags and not set(self.tags) <= set(m.tags):
            return False
        if self.topics and not set(self.topics) & set(m.topics or ()):
            return False
        if self.fact_types and m.fact_type not in self.fact_types:
            return False
        if self.pinned is not None and m.pinned != self.pinned:
            return False
        when = m.occurred_at or m.created_at
        return (self.since is None or when >= self.since) and (self.until is None or when < self.until)

    @field_validator("projects", mode="before")
    @classmethod
    def _projects(cls, value: Any, info: ValidationInfo) -> tuple[str, ...]:
        default = config_of(info).default_project
        names = value if isinstance(value, list | tuple) else [value]
        return tuple(dict.fromkeys(v.project_name(p, default) for p in names))

    @field_validator("category", mode="before")
    @classmethod
    def _category(cls, value: Any) -> str | None:
        return v.category_name(value)

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, value: Any, info: ValidationInfo) -> tuple[str, ...]:
        return v.tag_list(value, config_of(info).remember.max_tags)

    @field_validator("topics", mode="before")
    @classmethod
    def _topics(cls, value: Any) -> tuple[str, ...]:
        return v.topics_filter(value)

    @field_validator("fact_types", mode="before")
    @classmethod
    def _fact_types(cls, value: Any) -> tuple[str, ...]:
        return v.fact_types_filter(value)

    @field_validator("pinned", mode="before")
    @classmethod
    def _pinned(cls, value: Any) -> bool | None:
        if value is not None and not isinstance(value, bool):
            raise InvalidInput("pinned must be true or false")
        return value

    @field_validator("since", "until", mode="before")
    @classmethod
    def _dates(cls, value: Any, info: ValidationInfo) -> datetime | None:
        return v.parse_datetime(value, info.field_name or "date")
