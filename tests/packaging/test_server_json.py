"""``server.json``, what the MCP Registry publishes: valid against the registry's schema, and true
to the package it names (its version, its name, the README line the registry checks, the settings
its variables set, the command line it starts).

The schema is kept in tests/data/registry/ (where it came from is in the README there). A
self-hosted streamable-HTTP server is a second *package* entry whose transport is
``streamable-http`` with a URL templated on its ``--port`` argument, as the registry's docs show
for local servers: ``remotes`` are for servers someone hosts, and the registry refuses localhost
there.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
import typing
from importlib import metadata
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from memlane.pipeline.config import LLMProviderName
from memlane.server.cli.main import _parser
from memlane.server.mcp.stdio_front import _serves_stdio
from memlane.server.settings import ENV_PREFIX, ServerConfig, Settings, load

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "tests/data/registry/server.schema.json").read_text(encoding="utf-8"))
SERVER = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
NAME = "io.github.memlane/memlane"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith(ENV_PREFIX):
            monkeypatch.delenv(k)


def validator() -> jsonschema.Draft7Validator:
    """The validator of the schema's own draft, checking formats; every format the schema uses must
    be one the checker knows (``uri`` needs rfc3986-validator), or it would pass unchecked."""
    cls = jsonschema.validators.validator_for(SCHEMA)
    assert cls is jsonschema.Draft7Validator, SCHEMA["$schema"]
    cls.check_schema(SCHEMA)
    used = set(re.findall(r'"format": "([^"]+)"', json.dumps(SCHEMA, indent=0)))
    assert used <= set(cls.FORMAT_CHECKER.checkers), (
        f"formats not checked: {used - set(cls.FORMAT_CHECKER.checkers)}"
    )
    return cls(SCHEMA, format_checker=cls.FORMAT_CHECKER)


def errors(doc: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(doc)]


def command_line(pkg: dict[str, Any]) -> list[str]:
    """The arguments a client passes after the package's command: each positional's value, each
    named argument as ``--name value`` (its value, else its default)."""
    argv: list[str] = []
    for arg in pkg.get("packageArguments", []):
        value = arg.get("value", arg.get("default"))
        if arg["type"] == "named":
            argv.append(arg["name"])
        assert value is not None, f"argument {arg} has neither a value nor a default"
        argv.append(value)
    return argv


def test_server_json_is_valid_against_the_registry_schema():
    assert SERVER["$schema"] == SCHEMA["$id"]
    assert errors(SERVER) == []


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda d: d.pop("name"), "'name' is a required property"),
        (lambda d: d.update(description="x" * 101), "is too long"),
        (lambda d: d["packages"][0].update(version="latest"), "should not be valid"),
        (lambda d: d["repository"].update(url="not a uri"), "is not a 'uri'"),
        (lambda d: d["packages"][1]["transport"].pop("url"), "is not valid under any of the given schemas"),
    ],
    ids=["no-name", "long-description", "version-latest", "bad-uri", "http-without-url"],
)
def test_the_validator_rejects_a_broken_copy(breakage, message):
    broken = copy.deepcopy(SERVER)
    breakage(broken)
    found = errors(broken)
    assert any(message in e for e in found), found


def test_versions_are_the_package_version():
    version = metadata.version("memlane")
    assert version == PYPROJECT["project"]["version"]
    assert SERVER["version"] == version
    assert [p["version"] for p in SERVER["packages"]] == [version] * len(SERVER["packages"])


def test_every_package_is_memlane_on_pypi_run_with_uvx():
    assert SERVER["name"] == NAME
    for pkg in SERVER["packages"]:
        assert pkg["registryType"] == "pypi"
        assert pkg["registryBaseUrl"] == "https://pypi.org"  # the only one the official registry takes
        assert pkg["identifier"] == PYPROJECT["project"]["name"] == "memlane"
        # `uvx memlane ...` runs the console script named like the package.
        assert pkg["runtimeHint"] == "uvx"
    scripts = {
        e.name: e.value for e in metadata.entry_points(group="console_scripts") if e.dist.name == "memlane"
    }
    assert scripts == {"memlane": "memlane.server.cli.main:main"}


def test_readme_has_the_mcp_name_line_the_registry_checks():
    """The registry finds ``mcp-name: NAME`` in the PyPI description (the README), followed by a
    boundary: whitespace, a tag or the comment's close."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert PYPROJECT["project"]["readme"] == "README.md"
    assert readme[0].startswith("# ")
    assert readme[1] == f"<!-- mcp-name: {SERVER['name']} -->"
    assert sum("mcp-name:" in line for line in readme) == 1


def _variables() -> list[dict[str, Any]]:
    return [v for pkg in SERVER["packages"] for v in pkg.get("environmentVariables", [])]


def _setting(name: str) -> tuple[str, ...]:
    """``MEMLANE_LLM__API_KEY`` -> ``("llm", "api_key")``."""
    assert name.startswith(ENV_PREFIX), name
    return tuple(name[len(ENV_PREFIX) :].lower().split("__"))


def test_every_variable_is_a_setting_memlane_reads(monkeypatch):
    values = {
        "MEMLANE_DATA_DIR": "/srv/memlane-data",
        "MEMLANE_DEFAULT_PROJECT": "work",
        "MEMLANE_LLM__PROVIDER": "anthropic",
        "MEMLANE_LLM__API_KEY": "sk-ant-test",
    }
    names = {v["name"] for v in _variables()}
    assert names == set(values)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    s = load()
    for name, value in values.items():
        got: Any = s
        for key in _setting(name):
            got = getattr(got, key)
        got = got.get_secret_value() if hasattr(got, "get_secret_value") else got
        assert str(got) == value, name


def test_variables_say_what_the_settings_say():
    """Secret exactly when the setting is a secret; defaults and choices those of the model."""
    from memlane.pipeline.config import secret_fields

    secrets = set(secret_fields(Settings))
    defaults = Settings.model_construct()
    for var in _variables():
        path = _setting(var["name"])
        assert var.get("isSecret", False) == (path in secrets), var["name"]
        assert var.get("isRequired", False) is False, var["name"]  # memlane runs with none of them
        if "default" in var:
            value: Any = defaults
            for key in path:
                value = getattr(value, key)
            assert var["default"] == str(value), var["name"]
    provider = next(v for v in _variables() if v["name"] == "MEMLANE_LLM__PROVIDER")
    assert provider["choices"] == list(typing.get_args(LLMProviderName))


def test_stdio_package_runs_memlane_serve_over_stdio():
    stdio = [p for p in SERVER["packages"] if p["transport"]["type"] == "stdio"]
    assert len(stdio) == 1
    argv = command_line(stdio[0])
    assert argv == ["serve"]
    args = _parser().parse_args(argv)
    assert args.command == "serve" and args.transport is None  # server.transport: stdio
    assert _serves_stdio(argv)


def test_http_package_runs_memlane_serve_over_http_at_the_url_it_names():
    http = [p for p in SERVER["packages"] if p["transport"]["type"] == "streamable-http"]
    assert len(http) == 1
    pkg = http[0]
    argv = command_line(pkg)
    args = _parser().parse_args(argv)
    assert (args.command, args.transport, args.port) == ("serve", "http", ServerConfig().port)
    assert not _serves_stdio(argv)
    # The URL's {variables} are the package's argument names (what the registry accepts), and
    # filled in they give where `memlane serve --transport http` listens: the bind address by
    # default, /mcp (server/mcp/serve.py).
    url = pkg["transport"]["url"]
    names = {a.get("name") for a in pkg["packageArguments"]} | {
        a.get("valueHint") for a in pkg["packageArguments"]
    }
    variables = re.findall(r"{([^}]+)}", url)
    assert variables and set(variables) <= names - {None}
    port = next(a for a in pkg["packageArguments"] if a.get("name") == "--port")
    assert port["isRequired"] is True  # the URL needs it
    filled = url.replace("{--port}", port["default"])
    assert filled == f"http://{ServerConfig().host}:{ServerConfig().port}/mcp"
