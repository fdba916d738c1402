"""Request values: what a caller asks of the engine, checked once, in one declaration per operation.

``Request`` is the base of every one of them (``MemoryInput``, ``MemoryPatch``, ``MemoryRef`` and
``IngestRequest`` in ``remember/inputs.py``, ``RecallQuery`` in ``recall/query.py``, and
``Filters`` here): a frozen pydantic model whose fields run memlane's own checks (``validate.py``)
before pydantic's type check, built by ``parse`` with the configured limits.

A field a caller gives carries its ``Param``: what it means to the caller (its description), the
choices it takes, and where a front end spells it differently. ``Request.parameters(front)`` is
what each front end offers, and the front ends are generated from it: the MCP tool's input schema
(``server/mcp/tools.py``), the ``memlane`` command's options (``server/cli/options.py``) and the
memory browser's form (``server/ui/forms.py``). A field no front end offers, or one front end
does not, is named in the request's ``NOT_OFFERED`` with the reason; a field with neither is an
error when the parameters are read.

Errors are ``InvalidInput`` with the message of the check that failed, so every entry point (the
tools, the CLI, import, the memory browser) tells the caller the same thing in the same words.

``Filters`` is what a memory must be to be read: the store's statements take it whole (their SQL
is ``store/filters.py``) and recall's Python arms admit their hits with ``Filters.admits``, so a
filter is added to this class, to that SQL and to ``admits``.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator

from memlane.pipeline import validate as v
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.records import Memory


def config_of(info: ValidationInfo) -> EngineConfig:
    """The configuration a ``parse`` call validates against (its limits)."""
    cfg = (info.context or {}).get("config")
    return cfg if cfg is not None else EngineConfig()


# The front ends: the MCP tools, the ``memlane`` command, the memory browser.
FRONTS = ("mcp", "cli", "ui")
_FROM_FIELD: Any = object()  # ``Param.default``: the field's own


@dataclass(frozen=True, slots=True)
class Param:
    """A request field as a caller gives it. ``description`` is what the client's model, ``--help``
    and the form say (keep it short, and say what an omitted value means); ``choices`` the values
    it takes (a list field: each element's); ``name`` the caller's name where it is not the
    field's; ``wire`` the type a caller gives where it is not derived from the field's (a date is
    a string, a tuple a list, and an omitted value ``None``); ``default`` the default a caller is
    shown where it is not the field's; ``flag`` the command line's option where it is not
    ``--field-name``; ``help`` what ``--help`` says where the description speaks to a model
    ("the user", "as you read it") rather than to the person at the command line (the tool's
    description stays what every client's model was shown)."""

    description: str
    choices: tuple[str, ...] | None = None
    name: str | None = None
    wire: Any = None
    default: Any = _FROM_FIELD
    flag: str | None = None
    help: str | None = None


@dataclass(frozen=True, slots=True)
class Parameter:
    """One parameter as a front end offers it (``Request.parameters``)."""

    name: str
    wire: Any  # the type a caller gives (the tool's schema is made from it)
    default: Any  # ``Parameter.REQUIRED`` when the caller must give it
    description: str
    choices: tuple[str, ...] | None
    flag: str  # the command line's option
    help: str  # the command line's help: the description, or its words for a person
    field: Any  # the field's own type (a date: ``datetime``)
    path: tuple[str, ...]  # the field it fills, from the request (``("filters", "tags")``)

    REQUIRED: ClassVar[Any] = object()

    @property
    def required(self) -> bool:
        return self.default is Parameter.REQUIRED

    def takes(self, kind: type) -> bool:
        """Whether a caller may give a ``kind``: the type it gives is ``kind``, a generic of it
        (``list[str]`` takes a ``list``), or a union with one of those."""
        return any(t is kind or get_origin(t) is kind for t in (self.wire, *get_args(self.wire)))

    @property
    def many(self) -> bool:
        """A list: the command line's option repeats, the form's text is comma-separated."""
        return self.takes(list)

    @property
    def is_date(self) -> bool:
        return datetime in (self.field, *get_args(self.field))


def _wire_type(annotation: Any, choices: tuple[str, ...] | None, optional: bool) -> Any:
    """The type a caller gives for a field: a date as an ISO 8601 string, a tuple as a list, a
    field with choices as their ``Literal``; ``| None`` when omitting it is allowed."""
    args = get_args(annotation)
    if get_origin(annotation) in (Union, type(int | None)) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 - built from a tuple
    if get_origin(annotation) is tuple:
        element = Literal[choices] if choices else get_args(annotation)[0]
        annotation = list[element]  # type: ignore[valid-type] # a type made at runtime
    elif choices:
        annotation = Literal[choices]
    elif annotation is datetime:
        annotation = str
    return annotation | None if optional else annotation


class Request(BaseModel):
    """A request's fields; a subclass declares them with their checks (``mode="before"`` field
    validators, so the message is memlane's) and callers build it with ``parse``."""

    model_config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    _noun: ClassVar[str] = "field"  # what an unknown key is called in the error
    _what: ClassVar[str] = "a request"  # what the whole value is, in the error for a non-object

    # Parameters a front end deliberately does not offer: {name: (the front ends, why)}.
    NOT_OFFERED: ClassVar[dict[str, tuple[tuple[str, ...], str]]] = {}
    # The order the front ends list the parameters in, where it is not the fields' (a parameter
    # not named here comes after these, in the fields' order).
    ORDER: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def accepted(cls) -> tuple[str, ...]:
        """The keys a caller may give."""
        return tuple(cls.model_fields)

    @classmethod
    def parameters(cls, front: str) -> tuple[Parameter, ...]:
        """What ``front`` (one of ``FRONTS``) offers a caller, in order."""
        if front not in FRONTS:
            raise ValueError(f"front must be one of {', '.join(FRONTS)}; got {front!r}")
        offered = [p for p in cls.declared() if front not in cls.NOT_OFFERED.get(p.name, ((), ""))[0]]
        rank = {name: i for i, name in enumerate(cls.ORDER)}
        return tuple(sorted(offered, key=lambda p: rank.get(p.name, len(rank))))

    @classmethod
    def declared(cls) -> list[Parameter]:
        """Every field's parameter, a request-valued field's (``Filters``) spliced in its place;
        raises ``TypeError`` for a field with no ``Param`` that is not ``NOT_OFFERED`` anywhere."""
        out: list[Parameter] = []
        for name, info in cls.model_fields.items():
            annotation = info.annotation
            if isinstance(annotation, type) and issubclass(annotation, Request):
                out.extend(replace(p, path=(name, *p.path)) for p in annotation.declared())
                continue
            param = next((m for m in info.metadata if isinstance(m, Param)), None)
            if param is None:
                if set(cls.NOT_OFFERED.get(name, ((), ""))[0]) != set(FRONTS):
                    raise TypeError(f"{cls.__name__}.{name} has no Param and is not in NOT_OFFERED")
                continue
            default = info.default if param.default is _FROM_FIELD else param.default
            if param.default is _FROM_FIELD and info.is_required():
                default = Parameter.REQUIRED
            elif not isinstance(default, bool | str):
                default = None  # omitted: the engine's default (``None`` to the caller)
            wire = param.wire or _wire_type(annotation, param.choices, default is None)
            caller = param.name or name
            out.append(
                Parameter(
                    name=caller,
                    wire=wire,
                    default=default,
                    description=param.description,
                    choices=param.choices,
                    flag=param.flag or "--" + caller.replace("_", "-"),
                    help=param.help or param.description,
                    field=annotation,
                    path=(name,),
                )
            )
        return out

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

    def value_of(self, parameter: str) -> Any:
        """The value of the field the parameter ``parameter`` (a caller's name) fills."""
        path = next(p.path for p in type(self).declared() if p.name == parameter)
        return functools.reduce(getattr, path, self)

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
    projects: Annotated[
        tuple[str, ...],
        Param(
            "Project to search; omitted = the default project. A list of projects, or '*' for every "
            "project you may read, searches them all, boosting current_project's memories.",
            name="project",
            wire=str | list[str] | None,
            help="Project to search; omitted: the default project. Several projects, or '*' for "
            "every project, are searched together, --current-project's memories ranked first.",
        ),
    ] = ()
    category: Annotated[str | None, Param("Only memories of this category.")] = None
    tags: Annotated[
        tuple[str, ...], Param("Only memories carrying all these tags.", flag="--tag")
    ] = ()  # all of them
    topics: Annotated[
        tuple[str, ...], Param("Only memories with at least one of these topics.", flag="--topic")
    ] = ()  # at least one of them
    fact_types: Annotated[
        tuple[str, ...],
        Param(
            f"Only memories of these fact types ({', '.join(v.FACT_TYPES)}).",
            choices=v.FACT_TYPES,
            flag="--fact-type",
        ),
    ] = ()  # one of them
    pinned: Annotated[bool | None, Param("Only pinned memories (true) or only unpinned ones (false).")] = None
    # When it happened (occurred_at, else when it was stored): since inclusive, until exclusive.
    since: Annotated[
        datetime | None, Param("Only memories of this time or later (ISO 8601), by when they happened.")
    ] = None
    until: Annotated[
        datetime | None, Param("Only memories of before this time (ISO 8601), by when they happened.")
    ] = None

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
