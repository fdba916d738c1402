"""One model of a memory as callers give it: ``MemoryInput`` for remember and import, ``MemoryPatch``
for update, ``MemoryRef`` for the memory forget and update name. The MCP tools, the CLI and
``memlane import`` build these and nothing else validates a memory's fields; limits come from the
configuration through ``parse`` (``pipeline/request.py``). Their fields' ``Param`` are the tools'
parameters and the CLI's options.

A new memory's ``expires_at`` must be in the future (one already past could never be recalled);
``memlane import`` parses with ``restoring=True``, which keeps an export's expiry as it was.

Likely secrets in the content and the metadata are redacted (or refused) here, per ``[remember]
secrets`` (``secrets.py``), before anything is embedded or stored; ``redacted`` says what was done.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Self, TypeVar

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from memlane.pipeline import validate as v
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.remember import secrets
from memlane.pipeline.request import FRONTS, Param, Request, config_of
from memlane.pipeline.validate import fact_type_value

# What ``[remember] secrets`` applies to: the content, and the metadata object.
_Redactable = TypeVar("_Redactable", str, dict[str, Any])


def _secrets(value: _Redactable, field: str, info: ValidationInfo) -> _Redactable:
    """``[remember] secrets`` on a validated field; the counts go to the parse call's context."""
    ctx = info.context if info.context is not None else {}
    counts: Counter[str] = ctx.setdefault("redacted", Counter())
    return secrets.apply_deep(value, config_of(info).remember.secrets, field, counts)


PROJECT = "Project to file it under; omitted = the default project."
FACT_TYPE = (
    "world: a fact about the world or others; experience: something the user or you did or went "
    "through; opinion: a belief or judgement; instruction: how the user wants things done, standing "
    '("always ..."); preference: the user\'s own preference ("I prefer ..."). Omitted: classified.'
)
# The same, to the person at the command line (FACT_TYPE is what every client's model was shown).
FACT_TYPE_HELP = (
    "world: a fact about the world or others; experience: something you did or went through; "
    'opinion: a belief or judgement; instruction: how you want things done, standing ("always '
    '..."); preference: your own preference ("I prefer ..."). Omitted: classified.'
)


class MemoryRef(Request):
    """The memory forget deletes and update changes: its id, or a handle (a unique start of it)
    that ``Engine`` resolves."""

    id: Annotated[
        str, Param("The memory's id or a unique start of it (8+ hex digits), as recall returns it.")
    ]


class _Fields(Request):
    """The checks shared by both models; each runs before pydantic's own type check, so the
    message is memlane's."""

    _what: ClassVar[str] = "a memory"
    _redacted: tuple[tuple[str, int], ...] = PrivateAttr(default=())

    @property
    def redacted(self) -> list[dict[str, Any]]:
        """Secrets replaced by placeholders: ``[{"kind": "openai_key", "count": 1}]``."""
        return [{"kind": k, "count": n} for k, n in self._redacted]

    def _parsed(self, context: dict[str, Any]) -> None:
        self._redacted = tuple(sorted(context["redacted"].items()))

    @field_validator("project", mode="before", check_fields=False)
    @classmethod
    def _project(cls, value: Any, info: ValidationInfo) -> str:
        return v.project_name(value, config_of(info).default_project)

    @field_validator("source", mode="before", check_fields=False)
    @classmethod
    def _source(cls, value: Any) -> str | None:
        if value is not None and not isinstance(value, str):
            raise InvalidInput("source must be a string")
        return v.storable_text(value, "source") if value is not None else None

    @field_validator("category", mode="before", check_fields=False)
    @classmethod
    def _category(cls, value: Any) -> str | None:
        return v.category_name(value)

    @field_validator("tags", mode="before", check_fields=False)
    @classmethod
    def _tags(cls, value: Any, info: ValidationInfo) -> tuple[str, ...]:
        return v.tag_list(value, config_of(info).remember.max_tags)

    @field_validator("metadata", mode="before", check_fields=False)
    @classmethod
    def _metadata(cls, value: Any, info: ValidationInfo) -> dict[str, Any] | None:
        checked = v.metadata_object(value, config_of(info).remember.max_metadata_bytes)
        return _secrets(checked, "metadata", info) if checked is not None else None

    @field_validator("priority", mode="before", check_fields=False)
    @classmethod
    def _priority(cls, value: Any) -> int:
        return v.priority_value(value)

    @field_validator("occurred_at", mode="before", check_fields=False)
    @classmethod
    def _occurred_at(cls, value: Any) -> datetime | None:
        return v.parse_datetime(value, "occurred_at")

    @field_validator("expires_at", mode="before", check_fields=False)
    @classmethod
    def _expires_at(cls, value: Any, info: ValidationInfo) -> datetime | None:
        when = v.parse_datetime(value, "expires_at")
        # An import restores memories as they were (context ``restoring``): one exported before it
        # expired keeps its expiry, as the store it came from did.
        if (info.context or {}).get("restoring"):
            return when
        return v.expiry(when, datetime.now(UTC))

    @field_validator("fact_type", mode="before", check_fields=False)
    @classmethod
    def _fact_type(cls, value: Any) -> str | None:
        return fact_type_value(value)

    @field_validator("pinned", mode="before", check_fields=False)
    @classmethod
    def _pinned(cls, value: Any) -> bool:
        # None is "not given": MemoryInput's default (false); MemoryPatch drops None before this.
        if value is None:
            return False
        if not isinstance(value, bool):
            raise InvalidInput("pinned must be true or false")
        return value


class MemoryInput(_Fields):
    """A memory to store. ``project`` defaults to ``default_project``."""

    content: Annotated[str, Param("The fact, preference, decision or event, as a self-contained sentence.")]
    project: Annotated[str, Param(PROJECT)] = Field(
        default=None, validate_default=True
    )  # None -> the default project
    category: Annotated[str | None, Param("e.g. preference, decision, fact, person, incident, todo.")] = None
    tags: Annotated[tuple[str, ...], Param("Short labels to filter by later.", flag="--tag")] = ()
    pinned: Annotated[bool, Param("Pinned memories are meant to be always relevant.")] = False
    priority: Annotated[int, Param("1 (low) to 5 (critical); default 3.")] = v.PRIORITY_DEFAULT
    occurred_at: Annotated[
        datetime | None, Param("When it happened, ISO 8601 (2024-05-08 or 2024-05-08T13:56:00Z).")
    ] = None
    expires_at: Annotated[
        datetime | None,
        Param(
            "When it stops being true, ISO 8601; recall ignores it after.",
            help="When it stops being true: a future date, ISO 8601. Recall ignores the memory from then on.",
        ),
    ] = None
    metadata: Annotated[dict[str, Any], Param("Any JSON object; stored and returned as given.")] = {}
    # world, experience or opinion...; None: classified (pipeline/remember/facttypes.py)
    fact_type: Annotated[str | None, Param(FACT_TYPE, choices=v.FACT_TYPES, help=FACT_TYPE_HELP)] = None
    source: Annotated[
        str | None,
        Param(
            "The conversation, session or document this memory comes from (e.g. the chat's id). "
            "Pass the same value for every memory of one conversation: they are linked in order. "
            "Without it, memories remembered one after another in a project are linked while they "
            "are close in time."
        ),
    ] = None
    position: int | None = None  # order within ``source`` (0-based): a conversation's turn, a chunk

    NOT_OFFERED: ClassVar[dict[str, tuple[tuple[str, ...], str]]] = {
        "position": (FRONTS, "import's: an export's order within a source (remember continues one)"),
    }

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any, info: ValidationInfo) -> str:
        return _secrets(v.content_text(value, config_of(info).remember.max_content_chars), "content", info)

    @field_validator("position", mode="before")
    @classmethod
    def _position(cls, value: Any) -> int | None:
        return v.position_value(value)

    @property
    def content_hash(self) -> str:
        return v.content_hash(self.content, self.occurred_at)


KINDS = ("conversation", "document")


class IngestRequest(_Fields):
    """A conversation or a document to ingest (``ingest.py``), and what every piece of it gets;
    the pieces are then checked one by one as ``MemoryInput``."""

    _noun: ClassVar[str] = "ingest parameter"
    _what: ClassVar[str] = "an ingest"

    text: Annotated[
        str,
        Param(
            "A conversation ('Speaker: text' lines, or a JSON list of {role, content} messages) "
            "or a document."
        ),
    ]
    kind: Annotated[
        str,
        Param("conversation: one piece per turn; document: chunks of about 256 tokens.", choices=KINDS),
    ] = "conversation"
    project: Annotated[str, Param(PROJECT)] = Field(default=None, validate_default=True)
    source: Annotated[
        str | None,
        Param("Name of the conversation or document; default 'ingest:' + a hash of the text."),
    ] = None
    occurred_at: Annotated[datetime | None, Param("When it happened, ISO 8601; applies to every piece.")] = (
        None
    )
    category: Annotated[str | None, Param("Category for every piece.")] = None
    tags: Annotated[tuple[str, ...], Param("Tags for every piece.", flag="--tag")] = ()

    NOT_OFFERED: ClassVar[dict[str, tuple[tuple[str, ...], str]]] = {
        "text": (("cli", "ui"), "memlane ingest reads it from its FILE (or stdin)"),
    }

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> str:
        most = config_of(info).ingest.max_input_chars
        if not isinstance(value, str) or not value.strip():
            raise InvalidInput(
                "text is empty: give a conversation ('Speaker: text' lines, or a JSON list of "
                '{"role", "content"} messages) or a document'
            )
        if len(value) > most:
            raise InvalidInput(
                f"text is {len(value)} characters; ingest takes at most {most} "
                "(ingest.max_input_chars): split it and ingest the parts (give them one source)"
            )
        return value

    @field_validator("kind", mode="before")
    @classmethod
    def _kind(cls, value: Any) -> str:
        return v.one_of(value, "kind", KINDS)

    @model_validator(mode="after")
    def _storable(self) -> Self:
        # After the kind: a text that is not storable is told after a kind that is unknown.
        v.storable_text(self.text, "text")
        return self


class MemoryPatch(_Fields):
    """Fields of an existing memory to change; a field left out (or ``None``) stays as it is. The
    project and source of a memory do not change."""

    _noun: ClassVar[str] = "updatable field"

    content: Annotated[str | None, Param("New text (re-embedded).")] = None
    category: Annotated[str | None, Param("New category.")] = None
    tags: Annotated[tuple[str, ...] | None, Param("New tags (replace the old ones).", flag="--tag")] = None
    pinned: Annotated[bool | None, Param("Pin or unpin.")] = None
    priority: Annotated[int | None, Param("1 (low) to 5 (critical).")] = None
    occurred_at: Annotated[datetime | None, Param("ISO 8601.")] = None
    expires_at: Annotated[
        datetime | None, Param("ISO 8601.", help="When it stops being true: a future date, ISO 8601.")
    ] = None
    metadata: Annotated[dict[str, Any] | None, Param("New metadata (replaces the old object).")] = None
    fact_type: Annotated[
        str | None,
        Param(
            "New fact type.",
            choices=v.FACT_TYPES,
            help="New fact type. " + FACT_TYPE_HELP.removesuffix(" Omitted: classified."),
        ),
    ] = None

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        return _secrets(v.content_text(value, config_of(info).remember.max_content_chars), "content", info)

    @classmethod
    def parse(cls, config: EngineConfig, data: Any, **context: Any) -> Self:
        """``None`` values mean "unchanged" and are dropped before validation (so a ``None``
        priority is not read as the default priority)."""
        if isinstance(data, dict):
            data = {k: val for k, val in data.items() if val is not None}
        patch = super().parse(config, data, **context)
        if not patch.changes():
            raise InvalidInput(f"nothing to update: give at least one of {', '.join(cls.model_fields)}")
        return patch

    def changes(self) -> dict[str, Any]:
        """The fields to set, as the store takes them."""
        return {k: getattr(self, k) for k in self.model_fields_set if getattr(self, k) is not None}
