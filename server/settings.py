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

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from memlane.pipeline.config import EngineConfig, secret_fields
from memlane.pipeline.errors import ConfigError

ENV_PREFIX = "MEMLANE_"
# Variables with the prefix that are not settings: they choose the file, not a value in it.
NON_SETTING_ENV = {"MEMLANE_CONFIG"}


class ServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    transport: Literal["stdio", "http", "sse"] = Field(
        default="stdio",
        description="How `memlane serve` talks: stdio, http (streamable HTTP at /mcp) or sse (at /sse).",
    )
    host: str = Field(
        default="127.0.0.1", description="HTTP/SSE bind address; anything but loopback needs a bearer token."
    )
    port: int = Field(default=8765, ge=1, le=65535, description="HTTP/SSE port.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="Logging to stderr (stdout is the protocol over stdio)."
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="`memlane serve` and `memlane ui` log lines: text, or one JSON object a line (time, level, "
        "logger, message, and trace_id inside a traced tool call); `--log-format` overrides it.",
    )
    max_request_body_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=1024,
        description="HTTP/SSE: a request body larger than this is refused with 413.",
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="HTTP/SSE: Host header values accepted besides the loopback names, the bind address and "
        "auth.public_url's host ('name' or 'name:port'; 'name:*' for any port). Others get 421 (DNS "
        "rebinding protection).",
    )
    allowed_origins: list[str] = Field(
        default_factory=list,
        description="HTTP/SSE: Origin header values accepted besides those of the allowed hosts "
        "(e.g. 'https://app.example.com'). Others get 403.",
    )


class UIConfig(BaseModel):
    """The memory browser (server/ui): ``memlane ui``, and ``/ui`` in the HTTP server when enabled.
    It has no login yet, so both refuse to serve it on an address other than the loopback. Once a
    token exists, ``/ui`` answers only a token created with ``--projects '*'`` (it shows every
    project)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(
        default=False, description="Serve the memory browser at /ui in `memlane serve --transport http`."
    )
    port: int = Field(default=8766, ge=1, le=65535, description="The port of `memlane ui`.")


class TelemetryConfig(BaseModel):
    """Prometheus metrics (server/metrics.py): ``/metrics`` on the HTTP and SSE transports, and a
    loopback listener of its own for a stdio server that asks for one. Once a token exists,
    ``/metrics`` answers only a token created with ``--projects '*'``."""

    model_config = ConfigDict(extra="forbid")

    metrics_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Serve Prometheus metrics on http://127.0.0.1:PORT/metrics from a stdio server "
        "(HTTP and SSE servers have /metrics on their own port). Unset: none.",
        examples=[9464],
    )
    project_labels: bool = Field(
        default=False,
        description="Label memlane_memories by project (project names become label values); off: one "
        "total. At most project_label_limit projects, the largest, each; the rest are summed as '_other'.",
    )
    project_label_limit: int = Field(
        default=50, ge=1, le=1000, description="The most projects memlane_memories labels (project_labels)."
    )


class AuthConfig(BaseModel):
    """Bearer tokens for the HTTP transports (``memlane token create``; see server/auth/token_store.py).
    ``memlane token create --projects 'acme*' [--name N]`` prints a token once and stores only its
    SHA-256; ``memlane token list``, ``memlane token revoke NAME-or-PREFIX``. Once any token exists
    every HTTP request needs one (loopback included); with none, only the loopback may be served."""

    model_config = ConfigDict(extra="forbid")

    tokens_file: Path | None = Field(
        default=None,
        description="Where `memlane token create` stores token hashes and `memlane serve` reads them; "
        "default: tokens.json in the data directory.",
        examples=["~/.local/share/memlane/tokens.json"],
    )
    tokens: SecretStr | None = Field(
        default=None,
        description="Secret, from MEMLANE_AUTH__TOKENS only: a JSON list of "
        '{"name", "projects", "token"} (or "sha256" instead of "token").',
    )
    public_url: str | None = Field(
        default=None,
        description="The URL clients reach this server at (https://memlane.example.com); names the "
        "protected resource in 401 answers and is an allowed Host. Default: http://HOST:PORT.",
        examples=["https://memlane.example.com"],
    )
    issuer_url: str | None = Field(
        default=None,
        description="An OAuth 2.1 authorization server that issues tokens for this server, advertised in the "
        "protected resource metadata. Default: public_url (memlane's own tokens need none).",
        examples=["https://auth.example.com"],
    )
    rate_limit_per_minute: float = Field(
        default=600.0, ge=0, description="HTTP requests per minute per token (0: no limit); 429 beyond."
    )
    rate_limit_burst: int = Field(
        default=60, ge=1, description="Requests a token may make at once before the per-minute rate applies."
    )


class Settings(BaseSettings, EngineConfig):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        # An empty variable is an unset one: hosts that fill env from a form (an MCP bundle's
        # user_config) pass "" for a field left blank, and MEMLANE_DATA_DIR="" must not mean ".".
        env_ignore_empty=True,
        extra="forbid",
        validate_default=True,
        case_sensitive=False,
    )

    server: ServerConfig = ServerConfig()
    ui: UIConfig = UIConfig()
    auth: AuthConfig = AuthConfig()
    telemetry: TelemetryConfig = TelemetryConfig()

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
            _fields_set=self.model_fields_set - {"server", "ui", "auth"},
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
