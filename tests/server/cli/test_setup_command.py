"""What a client's memlane entry runs (server/cli/entry_command.py): the console script beside the
interpreter, or ``uvx --from SPEC memlane serve`` when memlane runs in uv's cache. The prefixes and
``direct_url.json`` below are what a real ``uvx`` run shows (the last test makes one)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from support.processes import ROOT
from support.setup_cli import make_host

from memlane.server.cli.clients import Host
from memlane.server.cli.entry_command import Process, local_command, uv_ephemeral, uvx_spec
from memlane.server.cli.setup import server_command

HOME = Path("/home/ana")
WHEEL_URL = '{"url":"file:///home/ana/dist/memlane-0.1.0-py3-none-any.whl","archive_info":{}}'


@pytest.mark.parametrize(
    ("prefix", "platform", "environ", "expected"),
    [
        ("/home/ana/.cache/uv/archive-v0/9zcToRGCfHYrsSQl", "linux", {}, True),
        ("/home/ana/Library/Caches/uv/archive-v0/abc", "darwin", {}, True),
        ("/scratch/uvc/archive-v0/7LtNxV7Wt0FHh0yG", "linux", {"UV_CACHE_DIR": "/scratch/uvc"}, True),
        ("/xdg-cache/uv/builds-v0/.tmpAbC", "linux", {"XDG_CACHE_HOME": "/xdg-cache"}, True),
        (r"C:\Users\ana\AppData\Local\uv\cache\archive-v0\Xy12", "win32", {}, True),
        (r"D:\uvcache\builds-v0\x", "win32", {"UV_CACHE_DIR": r"D:\uvcache"}, True),
        ("/home/ana/src/memlane/.venv", "linux", {}, False),
        ("/home/ana/.local/share/uv/tools/memlane", "linux", {}, False),  # uv tool install: lasts
        ("/home/ana/.local/pipx/venvs/memlane", "linux", {}, False),
        ("/scratch/uvc-other/archive", "linux", {"UV_CACHE_DIR": "/scratch/uvc"}, False),
        (r"C:\Users\ana\memlane\.venv", "win32", {"LOCALAPPDATA": r"C:\Users\ana\AppData\Local"}, False),
    ],
)
def test_uv_ephemeral_tells_a_uvx_environment_from_one_that_lasts(prefix, platform, environ, expected):
    assert uv_ephemeral(prefix, home=HOME, platform=platform, environ=environ) is expected


@pytest.mark.parametrize(
    ("direct_url", "platform", "expected"),
    [
        (WHEEL_URL, "linux", "/home/ana/dist/memlane-0.1.0-py3-none-any.whl"),
        (
            '{"url": "file:///home/ana/my%20wheels/memlane.whl", "archive_info": {}}',
            "linux",
            "/home/ana/my wheels/memlane.whl",
        ),
        ('{"url": "file:///home/ana/src/memlane", "dir_info": {}}', "linux", "/home/ana/src/memlane"),
        (
            '{"url": "file:///C:/Users/ana/memlane-0.1.0-py3-none-any.whl", "archive_info": {}}',
            "win32",
            r"C:\Users\ana\memlane-0.1.0-py3-none-any.whl",
        ),
        (
            '{"url": "https://example.org/memlane-0.1.0-py3-none-any.whl", "archive_info": {}}',
            "linux",
            "memlane==0.1.0",
        ),
        ('{"url": "https://github.com/x/memlane", "vcs_info": {"vcs": "git"}}', "linux", "memlane==0.1.0"),
        (None, "linux", "memlane==0.1.0"),
        ("not json", "linux", "memlane==0.1.0"),
    ],
)
def test_uvx_spec_is_the_local_file_installed_from_else_the_version(direct_url, platform, expected):
    assert uvx_spec(direct_url, "0.1.0", platform) == expected


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_under_uvx_the_entry_is_uvx_with_the_wheel(tmp_path):
    host = make_host(tmp_path)
    uvx = _executable(Path(host.environ["PATH"]) / "uvx")
    cache = host.home / ".cache/uv/archive-v0/9zcToRGCfHYrsSQl"
    process = Process(str(cache), str(cache / "bin/python"), str(cache / "bin/memlane"), WHEEL_URL, "0.1.0")
    command, args = server_command(host, process)
    assert command == str(uvx)
    assert args == ["--from", "/home/ana/dist/memlane-0.1.0-py3-none-any.whl", "memlane", "serve"]
    released = Process(str(cache), str(cache / "bin/python"), "memlane", None, "0.1.0")
    assert server_command(host, released)[1] == ["--from", "memlane==0.1.0", "memlane", "serve"]


def test_under_uvx_without_uvx_on_path_the_one_beside_uv_or_the_bare_name(tmp_path):
    cache = "/home/ana/.cache/uv/archive-v0/abc"
    process = Process(cache, cache + "/bin/python", cache + "/bin/memlane", None, "0.1.0")
    assert server_command(make_host(tmp_path), process)[0] == "uvx"
    uv_dir = tmp_path / "uv-bin"
    uvx = _executable(uv_dir / "uvx")
    host = make_host(tmp_path, UV=str(_executable(uv_dir / "uv")))  # uv sets UV in what it runs
    assert server_command(host, process)[0] == str(uvx)


def test_the_console_script_beside_the_interpreter_comes_first(tmp_path):
    venv = tmp_path / "venv/bin"
    script = _executable(venv / "memlane")
    assert local_command(str(venv / "python"), "/elsewhere/memlane", "linux") == (str(script), ["serve"])
    win = tmp_path / "winvenv/Scripts"
    exe = _executable(win / "memlane.exe")
    assert local_command(str(win / "python.exe"), "memlane", "win32") == (str(exe), ["serve"])


def test_without_one_the_started_script_resolved_else_python_m(tmp_path, monkeypatch):
    real = _executable(tmp_path / "pipx/venvs/memlane/bin/memlane")
    link = tmp_path / "local-bin/memlane"
    link.parent.mkdir()
    link.symlink_to(real)
    python = str(tmp_path / "base/bin/python3")
    assert local_command(python, str(link), "linux") == (str(real), ["serve"])
    monkeypatch.chdir(link.parent)
    assert local_command(python, "./memlane", "linux") == (str(real), ["serve"])
    pytest_main = str(tmp_path / "main.py")
    assert local_command(python, pytest_main, "linux") == (python, ["-m", "memlane.server.cli.main", "serve"])


def test_this_process_is_not_under_uvx_and_runs_its_venvs_script():
    process = Process.current()
    assert process.version and process.prefix == sys.prefix
    assert server_command(Host.current(), process) == (
        str(Path(sys.executable).parent / "memlane"),
        ["serve"],
    )


def _probe_wheel(dist: Path) -> Path:
    """A one-module wheel whose console script loads entry_command.py from this checkout (by path:
    memlane itself is not in the uvx environment) and prints what it decides there."""
    probe = f"""
import importlib.util, json, os, sys
from importlib.metadata import distribution
from pathlib import Path
spec = importlib.util.spec_from_file_location("entry_command", {str(ROOT / "server/cli/entry_command.py")!r})
ec = sys.modules["entry_command"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ec)
def main():
    direct_url = distribution("memlane-probe").read_text("direct_url.json")
    print(json.dumps({{
        "ephemeral": ec.uv_ephemeral(sys.prefix, home=Path.home(), platform=sys.platform, environ=os.environ),
        "spec": ec.uvx_spec(direct_url, "0", sys.platform),
        "prefix": sys.prefix,
    }}))
"""
    info = "memlane_probe-0.0.1.dist-info"
    files = {
        "memlane_probe.py": probe,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: memlane-probe\nVersion: 0.0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\nmemlane-probe = memlane_probe:main\n",
    }
    wheel = dist / "memlane_probe-0.0.1-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            data = text.encode()
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={digest},{len(data)}")
        z.writestr(f"{info}/RECORD", "\n".join([*record, f"{info}/RECORD,,"]) + "\n")
    return wheel


@pytest.mark.slow
def test_a_real_uvx_run_is_recognised_and_its_wheel_named(tmp_path):
    uvx = Path(sys.executable).with_name("uvx")
    if not uvx.exists():
        pytest.skip("uvx is not installed in this venv (the test extra brings uv)")
    dist = tmp_path / "dist"
    dist.mkdir()
    wheel = _probe_wheel(dist)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "XDG_"))} | {"HOME": str(home)}
    r = subprocess.run(
        [str(uvx), "--offline", "--from", str(wheel), "memlane-probe"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    seen = json.loads(r.stdout)
    assert seen["ephemeral"] is True, seen
    assert seen["spec"] == str(wheel)
    assert Path(seen["prefix"]).is_relative_to(home / ".cache/uv")
    shutil.rmtree(home / ".cache", ignore_errors=True)
