"""The built artefacts, not the checkout: the sdist and the wheel ``python -m build`` makes (the
wheel built from the sdist), installed the ways MCP users install a Python server (``pipx install``
and ``uvx --from``), each then started as ``memlane serve`` by a real MCP client over stdio."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from support.clients import call_ok
from support.processes import ROOT, server_env

pytestmark = pytest.mark.slow

VERSION = version("memlane")
TOOLS = ["remember", "ingest", "recall", "forget", "update"]
INSTALL_TIMEOUT = 900  # seconds: a first install downloads every dependency (onnxruntime, PostgreSQL)
BIN = Path(sys.executable).parent
# Package data the code reads at run time: missing from a wheel, memlane fails only once installed.
DATA = [
    "memlane/pipeline/store/migrations/0001_memories.sql",
    "memlane/pipeline/providers/embedding/data/all-MiniLM-L6-v2-vocab.txt",
    "memlane/prompts/prompts.lock",
    "memlane/prompts/hyde/v1.md",
    "memlane/server/ui/templates/base.html",
    "memlane/server/ui/static/style.css",
]


@pytest.fixture(scope="session")
def dist(tmp_path_factory) -> dict[str, Path]:
    """``python -m build`` of this checkout (as `make dist` runs it): the sdist, and the wheel built from it."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # The package configuration is unambiguous: setuptools warns about none of it (a data folder
    # Python could import, unlisted, was once a page of warnings each, in every `make run`).
    noise = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if "would be ignored" in line or "SetuptoolsDeprecationWarning" in line
    ]
    assert not noise, "\n".join(noise[:20])
    wheels, sdists = list(out.glob("*.whl")), list(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_the_wheel_and_sdist_carry_the_code_its_data_and_one_version(dist):
    assert dist["wheel"].name == f"memlane-{VERSION}-py3-none-any.whl"
    assert dist["sdist"].name == f"memlane-{VERSION}.tar.gz"
    with zipfile.ZipFile(dist["wheel"]) as whl:
        names = set(whl.namelist())
        metadata = whl.read(f"memlane-{VERSION}.dist-info/METADATA").decode()
        entry_points = whl.read(f"memlane-{VERSION}.dist-info/entry_points.txt").decode()
    assert set(DATA) <= names, set(DATA) - names
    assert "memlane/server/cli/main.py" in names and "memlane/pipeline/engine.py" in names
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/", "memlane/__init__"))]
    assert f"\nVersion: {VERSION}\n" in metadata
    assert "memlane = memlane.server.cli.main:main" in entry_points
    with tarfile.open(dist["sdist"]) as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
    assert {"pyproject.toml", "README.md", "server/cli/main.py", "pipeline/engine.py"} <= members
    assert "prompts/prompts.lock" in members


async def _serves(command: str, args: list[str], env: dict[str, str]) -> None:
    """``command args`` is ``memlane serve`` for a real stdio client: tools/list, then a memory
    remembered and recalled (the model, the prompts and the migrations come from the install)."""
    async with Client(StdioServerParameters(command=command, args=args, env=env)) as client:
        assert client.server_info.version == VERSION
        assert [t.name for t in (await client.list_tools()).tools] == TOOLS
        await call_ok(client, "remember", {"content": "memlane was installed from its wheel"})
        found = await call_ok(client, "recall", {"query": "how was memlane installed?"})
    assert found["memories"][0]["content"] == "memlane was installed from its wheel"


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT)
    assert done.returncode == 0, f"{cmd}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done


def _tool_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = server_env(tmp_path / "data", **extra)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # pipx and uv, from the test extra
    env.pop("VIRTUAL_ENV", None)
    return env


@pytest.mark.anyio
async def test_pipx_installs_the_wheel_and_memlane_serve_answers(dist, tmp_path):
    env = _tool_env(tmp_path, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"))
    _run([str(BIN / "pipx"), "install", "--python", sys.executable, str(dist["wheel"])], env)
    memlane = tmp_path / "bin" / "memlane"
    assert _run([str(memlane), "--version"], env).stdout.strip() == f"memlane {VERSION}"
    # Its own interpreter, outside this checkout: the code it runs is the wheel's.
    python = tmp_path / "pipx" / "venvs" / "memlane" / "bin" / "python"
    where = _run([str(python), "-c", "import memlane.server.cli.main as m; print(m.__file__)"], env)
    assert Path(where.stdout.strip()).is_relative_to(tmp_path / "pipx"), where.stdout
    # `memlane setup` writes the installed command; the client starts what the file says.
    entry = _set_up(str(memlane), [], "cursor", tmp_path, env)
    assert Path(entry["command"]).resolve() == memlane.resolve() and entry["args"] == ["serve"]
    await _serves(entry["command"], entry["args"], env)


@pytest.mark.anyio
async def test_uvx_runs_the_wheel_and_memlane_serve_answers(dist, tmp_path, database_url):
    uvx = shutil.which("uvx", path=str(BIN))
    assert uvx, "uv (the test extra) puts uvx beside this interpreter"
    env = _tool_env(
        tmp_path,
        UV_CACHE_DIR=str(tmp_path / "uv-cache"),
        UV_TOOL_DIR=str(tmp_path / "uv-tools"),
        UV_PYTHON=sys.executable,
        UV_PYTHON_DOWNLOADS="never",
        MEMLANE_DATABASE__URL=database_url,
    )
    args = ["--from", str(dist["wheel"]), "memlane"]
    assert _run([uvx, *args, "--version"], env).stdout.strip() == f"memlane {VERSION}"
    # Run through uvx, `memlane setup` writes the uvx form (the wheel it came from), and a client
    # starting that entry gets the server.
    entry = _set_up(uvx, args, "claude-desktop", tmp_path, env)
    assert Path(entry["command"]).name == "uvx"
    assert entry["args"] == ["--from", str(dist["wheel"]), "memlane", "serve"], entry
    await _serves(entry["command"], entry["args"], env)


def _set_up(command: str, args: list[str], client: str, tmp_path: Path, env: dict[str, str]) -> dict:
    """``memlane setup CLIENT`` under a temporary HOME; the memlane entry it wrote."""
    home = tmp_path / "home"
    setup_env = {**env, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    _run([command, *args, "setup", client], setup_env)
    path = {
        "cursor": home / ".cursor" / "mcp.json",
        "claude-desktop": home / ".config" / "Claude" / "claude_desktop_config.json",
    }[client]
    return json.loads(path.read_text())["mcpServers"]["memlane"]
