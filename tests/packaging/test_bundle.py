"""``make bundle``: dist/memlane.mcpb, the MCP bundle Claude Desktop installs. It validates with the
pinned mcpb CLI (which rejects a broken manifest), holds what ``uv run`` needs and nothing else,
and the server starts exactly as its manifest's ``mcp_config`` says: ``uv run`` in the unpacked
bundle, which builds memlane from source with its dependencies from PyPI, then ``memlane serve``
over stdio, with the user's settings in the environment.

The first start installs every dependency into the bundle's .venv (a cold uv cache, kept for the
session): tens of seconds on a fast network, so the timeouts are generous.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support.clients import call_ok
from support.postmaster import release_embedded

from memlane.pipeline.providers.llm.stub import StubLLM
from memlane.server.settings import ENV_PREFIX, Settings

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MCPB = ROOT / "node_modules" / ".bin" / "mcpb"
UV = Path(sys.executable).with_name("uv")  # the test extra installs it
PACKED = ROOT / "dist" / "memlane.mcpb"
BUILD_TIMEOUT = 600  # seconds: make bundle may run npm install first
START_TIMEOUT = 900  # seconds: the first start installs every dependency from PyPI
MAX_PACKED_BYTES = 1_000_000
# What the bundle holds at its top level: the build's inputs and the manifest.
TOP_LEVEL = {"manifest.json", "pyproject.toml", "README.md", "server", "pipeline", "prompts", "bench"}
API_KEY = "sk-ant-bundle-test-0123456789"
NETWORK_ENV = {"SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"}

if shutil.which("node") is None or not MCPB.exists():
    pytest.skip(
        f"the mcpb CLI is not installed ({MCPB} is missing; run `make node_modules/.bin/mcp-inspector`)",
        allow_module_level=True,
    )


def mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCPB), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def packed() -> Path:
    """``make bundle``, as a developer runs it."""
    r = subprocess.run(["make", "bundle"], cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Manifest schema validation passes!" in r.stdout
    assert PACKED.is_file()
    return PACKED


@pytest.fixture(scope="module")
def unpacked(packed) -> Path:
    """The bundle unpacked as a host installs it. Not under pytest's tmp dir, which is private to
    root while the embedded PostgreSQL (run from the bundle's .venv) runs as another user."""
    d = Path(tempfile.mkdtemp(prefix="memlane-bundle-"))
    d.chmod(0o755)
    with zipfile.ZipFile(packed) as z:
        z.extractall(d)
    return d


@pytest.fixture(scope="module")
def manifest(unpacked) -> dict[str, Any]:
    return json.loads((unpacked / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def host_env() -> dict[str, str]:
    """What a host adds to the manifest's environment: a PATH with uv on it (only uv, so the test
    sees no other tool of the venv) and a uv cache for the session. uv takes packages from PyPI
    (its default index): the stdio client passes on none of this process's UV_* variables, no
    uv.toml is read, and no Python is downloaded (the one on PATH serves). The machine's own TLS
    and proxy settings, when it has any, pass through: they say how to reach PyPI, not where to
    look instead."""
    assert UV.is_file(), f"{UV} is missing: the test extra installs uv (make install)"
    bin_dir = Path(tempfile.mkdtemp(prefix="memlane-uv-bin-"))
    (bin_dir / "uv").symlink_to(UV)
    network = {k: v for k, v in os.environ.items() if k in NETWORK_ENV or k.upper() in NETWORK_ENV}
    return network | {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "UV_CACHE_DIR": tempfile.mkdtemp(prefix="memlane-uv-cache-"),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
    }


_PLACEHOLDER = re.compile(r"\$\{user_config\.([A-Za-z0-9_]+)\}")


def launch(manifest: dict[str, Any], bundle: Path, values: dict[str, str], extra_env: dict[str, str]):
    """The manifest's mcp_config as a host runs it: ``${__dirname}`` is the bundle, each
    ``${user_config.KEY}`` the user's value, else the option's default. (Claude Desktop leaves the
    placeholder itself in place of an option with neither; the manifest gives each a default.)"""
    user = {key: values.get(key, spec.get("default")) for key, spec in manifest["user_config"].items()}
    assert set(values) <= set(user), f"no such user_config: {set(values) - set(user)}"

    def fill(text: str) -> str:
        text = text.replace("${__dirname}", str(bundle))
        return _PLACEHOLDER.sub(
            lambda m: m.group(0) if user[m.group(1)] is None else str(user[m.group(1)]), text
        )

    cfg = manifest["server"]["mcp_config"]
    env = {name: fill(value) for name, value in cfg.get("env", {}).items()}
    return StdioServerParameters(
        command=cfg["command"], args=[fill(a) for a in cfg["args"]], env=env | extra_env
    )


# -- the archive ----------------------------------------------------------------------------------


def test_bundle_holds_only_what_uv_run_needs_and_is_small(packed):
    with zipfile.ZipFile(packed) as z:
        names = z.namelist()
        unpacked_bytes = sum(i.file_size for i in z.infolist())
    assert {n.split("/")[0] for n in names} == TOP_LEVEL
    for name in names:
        parts = name.split("/")
        assert "__pycache__" not in parts and not name.endswith(".pyc"), name
        assert not any(p.endswith(".egg-info") or p in (".venv", "node_modules") for p in parts), name
        assert parts[:2] != ["bench", "results"], name  # the committed reports are no part of the package
    # Every committed source file of the three packages is there (nothing the build needs is lost).
    tracked = subprocess.run(
        ["git", "ls-files", "server", "pipeline", "prompts"], cwd=ROOT, capture_output=True, text=True
    )
    if tracked.returncode == 0:
        assert set(tracked.stdout.split()) <= set(names)
    size = packed.stat().st_size
    print(f"\n{packed.name}: {size:,} bytes packed, {unpacked_bytes:,} unpacked, {len(names)} files")
    assert size < MAX_PACKED_BYTES


def test_manifest_is_a_uv_server_of_the_package_version(manifest, unpacked):
    assert manifest["version"] == metadata.version("memlane")
    assert manifest["manifest_version"] == "0.4"  # the newest the CLI knows, the first with "uv"
    server = manifest["server"]
    assert server["type"] == "uv"
    assert (unpacked / server["entry_point"]).is_file()
    assert server["mcp_config"]["command"] == "uv"
    assert server["mcp_config"]["args"] == ["run", "--directory", "${__dirname}", "memlane", "serve"]


def test_user_config_reaches_memlane_settings(manifest):
    """Every variable the manifest sets is a memlane setting, filled from a declared option; every
    option is optional, with a default (so a blank one is never passed as its placeholder), and the
    key is the one sensitive option, set as the secret setting."""
    from memlane.pipeline.config import LLMConfig, secret_fields

    options = manifest["user_config"]
    env = manifest["server"]["mcp_config"]["env"]
    secrets = set(secret_fields(Settings))
    for name, value in env.items():
        (key,) = _PLACEHOLDER.fullmatch(value).groups()
        assert key in options, name
        path = tuple(name[len(ENV_PREFIX) :].lower().split("__"))
        model: Any = Settings
        for part in path:
            assert part in model.model_fields, f"{name} is not a memlane setting"
            model = model.model_fields[part].annotation
        assert options[key].get("sensitive", False) == (path in secrets), name
    assert set(options) == {_PLACEHOLDER.fullmatch(v).group(1) for v in env.values()}
    for key, spec in options.items():
        assert spec["required"] is False and "default" in spec, key
    assert options["data_dir"]["type"] == "directory" and options["data_dir"]["default"] == ""
    assert env["MEMLANE_LLM__API_KEY"] == "${user_config.llm_api_key}"
    assert options["llm_api_key"]["sensitive"] is True
    assert options["llm_provider"]["default"] == LLMConfig().provider == "none"


def test_mcpb_validate_passes_and_rejects_a_broken_manifest(unpacked, manifest, tmp_path):
    ok = mcpb("validate", str(unpacked / "manifest.json"))
    assert ok.returncode == 0 and "Manifest schema validation passes!" in ok.stdout, ok.stdout + ok.stderr
    for breakage, where in [
        (lambda m: m["server"].pop("mcp_config"), "server.mcp_config"),
        (lambda m: m["server"].update(type="conda"), "server.type"),
        (lambda m: m.pop("version"), "version"),
    ]:
        broken = json.loads(json.dumps(manifest))
        breakage(broken)
        path = tmp_path / "manifest.json"
        path.write_text(json.dumps(broken))
        r = mcpb("validate", str(path))
        assert r.returncode == 1 and "Manifest validation failed" in r.stdout, r.stdout + r.stderr
        assert f"- {where}:" in r.stdout, r.stdout


# -- the server, started as the manifest says -----------------------------------------------------


async def test_server_starts_as_the_manifest_says_and_remembers(manifest, unpacked, host_env, own_data_dir):
    """The first start (uv installs everything); an LLM provider configured through user_config,
    its key checked where it arrives: the provider's API (a local stand-in) sees it."""
    with StubLLM() as stub:
        values = {
            "data_dir": str(own_data_dir),
            "llm_provider": "anthropic",
            "llm_api_key": API_KEY,
            "llm_base_url": stub.anthropic_base_url,
        }
        params = launch(manifest, unpacked, values, host_env)
        start = time.monotonic()
        with anyio.fail_after(START_TIMEOUT):
            async with Client(params) as client:
                ready = time.monotonic() - start
                tools = [t.name for t in (await client.list_tools()).tools]
                assert tools == [t["name"] for t in manifest["tools"]]  # and in the same order
                stored = await call_ok(
                    client,
                    "remember",
                    {"content": "Dana keeps the release checklist in the ops wiki", "project": "bundle"},
                )
                assert stored["status"] == "created"
                found = await call_ok(
                    client, "recall", {"query": "where is the release checklist?", "project": "bundle"}
                )
                assert stored["id"].startswith(found["memories"][0]["id"])
                # The first recall may pass its LLM deadline (recall.deadline_ms) while a fresh venv
                # imports the provider's SDK; the second one asks the provider for certain.
                again = await call_ok(
                    client,
                    "recall",
                    {"query": "who keeps the release checklist?", "project": "bundle", "explain": True},
                )
                assert stored["id"].startswith(again["memories"][0]["id"])
                stats = json.loads((await client.read_resource("memlane://stats")).contents[0].text)
        total = time.monotonic() - start
    print(
        f"\nfirst start through uv: initialized after {ready:.1f} s, remember and recall done after {total:.1f} s"
    )
    assert stats["llm"]["provider"] == "anthropic"
    assert stub.requests, f"the LLM stages never called the provider: {again['trace']}"
    # The SDK sends the key as x-api-key or as a bearer token, by version.
    keys = {
        r["headers"].get("x-api-key") or r["headers"].get("authorization", "").removeprefix("Bearer ")
        for r in stub.requests
    }
    assert keys == {API_KEY}
    assert (own_data_dir / "pg").is_dir()  # data_dir is where the database went
    assert (unpacked / ".venv").is_dir() and not (unpacked / "pg").exists()


@pytest.mark.skipif(
    sys.platform != "linux", reason="the default data directory is redirected through XDG_DATA_HOME"
)
async def test_options_left_blank_mean_memlanes_defaults(manifest, unpacked, host_env):
    """Nothing filled in: the data directory is the user data directory (not the bundle, the
    working directory), and recall is offline."""
    home = Path(tempfile.mkdtemp(prefix="memlane-xdg-"))  # the user's data (and cache) directories
    xdg = {"XDG_DATA_HOME": str(home / "data"), "XDG_CACHE_HOME": str(home / "cache")}
    expected = home / "data" / "memlane"
    try:
        params = launch(manifest, unpacked, {}, host_env | xdg)
        assert params.env["MEMLANE_DATA_DIR"] == ""
        with anyio.fail_after(START_TIMEOUT):
            async with Client(params) as client:
                await call_ok(client, "remember", {"content": "The staging database moved to a new host"})
                stats = json.loads((await client.read_resource("memlane://stats")).contents[0].text)
        assert stats["llm"] == {"provider": "none"}
        assert stats["projects"] == {"default": 1}
        assert (expected / "pg").is_dir()
        assert not (unpacked / "pg").exists()
    finally:
        release_embedded(expected)
