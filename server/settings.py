"""Settings: defaults < TOML file < environment (``MEMLANE_*``, nested with ``__``) < explicit values.

The TOML file is ``--config PATH`` or ``MEMLANE_CONFIG``; ``config.example.toml`` documents every
key. Unknown keys, in the file or in ``MEMLANE_*`` variables, are errors that name the key.
Secrets (API keys, DSN passwords) belong in the environment; they are ``SecretStr`` and never logged.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memlane.pipeline.config import EngineConfig, secret_fields
from memlane.pipeline.errors import ConfigError

ENV_PREFIX = "MEMLANE_"
# Variables with the prefix that are not settings: they choose the file, not a value in it.
NON_SETTING_ENV = {"MEMLANE_CONFIG"}


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transport: Literal["stdio", "http", "sse"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=1, le=65535)
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"


class UIConfig(BaseModel):
    """The memory browser (server/ui): ``memlane ui``, and ``/ui`` in the HTTP server when enabled."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    port: int = Field(default=8766, ge=1, le=65535)


class Settings(BaseSettings, EngineConfig):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
        case_sensitive=False,
    )

    server: ServerConfig = ServerConfig()
    ui: UIConfig = UIConfig()

    # The parsed TOML file, set by load() around construction; a ClassVar, not a pydantic field.
    _toml: ClassVar[dict[str, Any]] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls, cls._toml))

    def engine(self) -> EngineConfig:
        """The engine's part of these settings: the same validated sections (secrets included),
        without a dump and a second validation."""
        return EngineConfig.model_construct(
            _fields_set=self.model_fields_set - {"server", "ui"},
            **{name: getattr(self, name) for name in EngineConfig.model_fields},
        )


class _TomlSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], data: dict[str, Any]) -> None:
        super().__init__(settings_cls)
        self._data = data

    def get_field_value(self, field, field_name):  # pragma: no cover - __call__ is used instead
        return self._data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._data)


def _check_env_names() -> None:
    known = set(Settings.model_fields)
    for name in os.environ:
        if not name.upper().startswith(ENV_PREFIX) or name.upper() in NON_SETTING_ENV:
            continue
        top = name[len(ENV_PREFIX) :].split("__", 1)[0].lower()
        if top not in known:
            raise ConfigError(
                f"environment variable {name} is not a memlane setting; top-level keys are: "
                f"{', '.join(sorted(known))} (nest with __, e.g. MEMLANE_RECALL__DEFAULT_LIMIT)"
            )


def _describe(err: ValidationError, source: str) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "(root)"
        if e["type"] == "extra_forbidden":
            lines.append(f"unknown key '{loc}'")
        else:
            lines.append(f"'{loc}': {e['msg']}")
    return f"invalid configuration ({source}): " + "; ".join(lines)


def load(config_path: str | os.PathLike | None = None, **overrides: Any) -> Settings:
    """Read settings; raises ConfigError with a message naming the bad key."""
    path = config_path or os.environ.get("MEMLANE_CONFIG")
    data: dict[str, Any] = {}
    source = "defaults and environment"
    if path:
        p = Path(path).expanduser()
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {p} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {p} is not valid TOML: {e}") from None
        source = f"{p} and environment"
        for secret in secret_fields(Settings):
            node: Any = data
            for key in secret[:-1]:
                node = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict) and secret[-1] in node:
                raise ConfigError(
                    f"'{'.'.join(secret)}' is a secret: set it in the environment "
                    f"({ENV_PREFIX}{'__'.join(secret).upper()}), not in {p}"
                )
    _check_env_names()
    Settings._toml = data
    try:
        return Settings(**overrides)
    except ValidationError as e:
        raise ConfigError(_describe(e, source)) from None
    finally:
        Settings._toml = {}
