"""One model of a memory as callers give it: ``MemoryInput`` for remember and import, ``MemoryPatch``
for update. The MCP tools, the CLI and ``memlane import`` build these and nothing else validates a
memory's fields; limits come from the configuration through ``parse`` (``pipeline/request.py``).

Likely secrets in the content and the metadata are redacted (or refused) here, per ``[remember]
secrets`` (``secrets.py``), before anything is embedded or stored; ``redacted`` says what was done.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any, ClassVar, Self, TypeVar

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator

from memlane.pipeline import validate as v
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.errors import InvalidInput
from memlane.pipeline.remember import secrets
from memlane.pipeline.request import Request, config_of
from memlane.pipeline.validate import fact_type_value

# What ``[remember] secrets`` applies to: the content, and the metadata object.
_Redactable = TypeVar("_Redactable", str, dict[str, Any])


def _secrets(value: _Redactable, field: str, info: ValidationInfo) -> _Redactable:
    """``[remember] secrets`` on a validated field; the counts go to the parse call's context."""
    ctx = info.context if info.context is not None else {}
    counts: Counter[str] = ctx.setdefault("redacted", Counter())
    return secrets.apply_deep(value, config_of(info).remember.secrets, field, counts)


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

    @field_validator("occurred_at", "expires_at", mode="before", check_fields=False)
    @classmethod
    def _dates(cls, value: Any, info: ValidationInfo) -> datetime | None:
        return v.parse_datetime(value, info.field_name or "date")

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

    content: str
    project: str = Field(default=None, validate_default=True)  # None -> the default project
    category: str | None = None
    tags: tuple[str, ...] = ()
    pinned: bool = False
    priority: int = v.PRIORITY_DEFAULT
    occurred_at: datetime | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] = {}
    source: str | None = None
    position: int | None = None  # order within ``source`` (0-based): a conversation's turn, a chunk
    fact_type: str | None = (
        None  # world, experience or opinion; None: classified (pipeline/remember/facttypes.py)
    )

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any, info: ValidationInfo) -> str:
        return _secrets(v.content_text(value, config_of(info).remember.max_content_chars), "content", info)

    @field_validator("project", mode="before")
    @classmethod
    def _project(cls, value: Any, info: ValidationInfo) -> str:
        return v.project_name(value, config_of(info).default_project)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, value: Any) -> str | None:
        if value is not None and not isinstance(value, str):
            raise InvalidInput("source must be a string")
        return v.storable_text(value, "source") if value is not None else None

    @field_validator("position", mode="before")
    @classmethod
    def _position(cls, value: Any) -> int | None:
        return v.position_value(value)

    @property
    def content_hash(self) -> str:
        return v.content_hash(self.content, self.occurred_at)


class MemoryPatch(_Fields):
    """Fields of an existing memory to change; a field left out (or ``None``) stays as it is. The
    project and source of a memory do not change."""

    _noun: ClassVar[str] = "updatable field"

    content: str | None = None
    category: str | None = None
    tags: tuple[str, ...] | None = None
    pinned: bool | None = None
    priority: int | None = None
    occurred_at: datetime | None = None
    expires_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    fact_type: str | None = None

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
