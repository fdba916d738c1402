"""``memlane bench footprint``: what memlane costs a machine. Resident memory of ``memlane serve``
and its embedded PostgreSQL after one conversation is remembered over MCP (one ``remember`` per
turn) and its questions recalled; with ``--install``, the size of a fresh ``pip install`` of the
project (no extras) and whether torch is importable there.

Memory is summed over the server process and every PostgreSQL process of its data directory:
RSS (what ``ps`` shows; PostgreSQL's shared buffers count once per backend that touched them) and
PSS (each shared page divided among the processes that share it: the honest total).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memlane.bench.common import versions
from memlane.bench.corpus import Corpus
from memlane.bench.mcpbench import _check, server_command


def _processes(server_pid: int, pgdata: Path) -> list:
    import psutil

    procs = [psutil.Process(server_pid)]
    for p in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
        except psutil.Error:
            continue
        if "postgres" in cmd and str(pgdata) in cmd:
            procs.append(p)
            procs.extend(p.children(recursive=True))
    return list({p.pid: p for p in procs}.values())


def memory_of(server_pid: int, pgdata: Path) -> dict[str, Any]:
    import psutil

    rss = pss = 0
    n = 0
    for p in _processes(server_pid, pgdata):
        try:
            info = p.memory_full_info()
        except psutil.Error:
            continue
        n += 1
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
    server = psutil.Process(server_pid).memory_info().rss
    return {
        "processes": n,
        "rss_mb": round(rss / 2**20, 1),
        "pss_mb": round(pss / 2**20, 1),
        "server_rss_mb": round(server / 2**20, 1),
    }


async def resident(turns: list[tuple[str, Any]], questions: list[str]) -> dict[str, Any]:
    """Spawn a server on a temporary data directory, remember ``turns`` one call each, recall
    ``questions``, then measure."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    data = Path(tempfile.mkdtemp(prefix="memlane-bench-footprint-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    env["MEMLANE_DATA_DIR"] = str(data)
    command, args = server_command()
    params = StdioServerParameters(command=command, args=args, env=env)
    try:
        with open(data / "server-stderr.log", "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                t0 = time.perf_counter()
                for content, when in turns:
                    args_ = {"content": content}
                    if when is not None:
                        args_["occurred_at"] = when.isoformat()
                    _check(await client.call_tool("remember", args_), "remember")
                stored_s = time.perf_counter() - t0
                for q in questions:
                    _check(await client.call_tool("recall", {"query": q}), "recall")
                pid = _server_pid(data)
                mem = memory_of(pid, data / "pg")
    finally:
        await asyncio.sleep(1.0)  # the server's exit stops its PostgreSQL
        shutil.rmtree(data, ignore_errors=True)
    return {**mem, "turns": len(turns), "questions": len(questions), "remember_s": round(stored_s, 1)}


def _server_pid(data: Path) -> int:
    """The ``memlane serve`` process using this data directory (the SDK's client keeps it private)."""
    import psutil

    for p in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = p.info["cmdline"] or []
            env = p.info["environ"] or {}
        except psutil.Error:
            continue
        if any(c.endswith("memlane") or "memlane.server.cli.main" in c for c in cmd) and "serve" in cmd:
            if env.get("MEMLANE_DATA_DIR") == str(data):
                return p.pid
    raise RuntimeError("the spawned memlane serve process was not found")


# What ``python -m venv`` puts in every venv before memlane: counted in the figure a user sees, and
# given apart.
VENV_TOOLS = ("pip", "setuptools", "_distutils_hack", "pkg_resources", "wheel")
LLM_SDKS = ("anthropic", "openai")  # loaded only when an LLM provider is configured


def install_size(source: Path) -> dict[str, Any]:
    """``pip install SOURCE`` (no extras) into a new venv, as a user installs; the size of its whole
    site-packages (the one figure the README quotes), without the venv's own tools, and the LLM
    SDKs' share."""
    venv = Path(tempfile.mkdtemp(prefix="memlane-bench-install-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        py = venv / "bin" / "python"
        t0 = time.perf_counter()
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(source)], check=True)
        seconds = time.perf_counter() - t0
        site = next((venv / "lib").glob("python*/site-packages"))
        files = [f for f in site.rglob("*") if f.is_file() and not f.is_symlink()]
        size = sum(f.stat().st_size for f in files)
        # What `du` shows and the disk loses: each file rounded up to whole blocks, about 15% more
        # than the bytes for the thousands of small files (.py, .pyc) a venv holds.
        disk = sum(f.stat().st_blocks * 512 for f in files)
        per_dir = {
            d.name: sum(f.stat().st_size for f in d.rglob("*") if f.is_file() and not f.is_symlink())
            for d in site.iterdir()
            if d.is_dir()
        }
        biggest = sorted(((b, name) for name, b in per_dir.items()), reverse=True)[:8]
        tools = sum(b for name, b in per_dir.items() if name.split("-")[0].lower() in VENV_TOOLS)
        sdks = {name: round(per_dir.get(name, 0) / 2**20, 1) for name in LLM_SDKS}
        torch = subprocess.run([str(py), "-c", "import torch"], capture_output=True).returncode == 0
        return {
            "disk_mb": round(disk / 2**20, 1),
            "site_packages_mb": round(size / 2**20, 1),
            "without_venv_tools_mb": round((size - tools) / 2**20, 1),
            "llm_sdks_mb": sdks,
            "largest": {name: round(b / 2**20, 1) for b, name in biggest},
            "torch_importable": torch,
            "pip_install_s": round(seconds, 1),
        }
    finally:
        shutil.rmtree(venv, ignore_errors=True)


async def run(conversation: str | None, *, install: bool, source: Path | None = None) -> dict[str, Any]:
    if conversation:
        from memlane.bench.locomo_data import load_conversations

        conv = load_conversations(conversation)[0]
        turns = [(t.content, t.occurred_at) for t in conv.turns]
        questions = [q.text for q in conv.questions]
        what = f"LoCoMo conversation {conv.name}"
    else:
        corpus = Corpus(seed=3)
        turns = [(it.content, it.occurred_at) for it in corpus.take(600)]
        questions = [q.text for q in corpus.questions(150)]
        what = "600 synthetic memories"
    report: dict[str, Any] = {"benchmark": "footprint", "resident": await resident(turns, questions)}
    report["resident"]["what"] = what
    if install:
        report["install"] = install_size(source or Path(__file__).resolve().parents[1])
    report["versions"] = await versions()
    return report


def markdown(r: dict[str, Any]) -> str:
    m = r["resident"]
    lines = [
        "## Footprint",
        "",
        f"`memlane serve` and its embedded PostgreSQL after {m['what']} ({m['turns']} turns, one `remember` "
        f"call each; {m['questions']} recalls): **{m['pss_mb']} MB** PSS over {m['processes']} processes "
        f"(RSS summed {m['rss_mb']} MB; the server alone {m['server_rss_mb']} MB RSS).",
    ]
    if "install" in r:
        i = r["install"]
        largest = ", ".join(f"{k} {v}" for k, v in i["largest"].items())
        if "disk_mb" in i:
            sdks = " + ".join(f"{k} {v}" for k, v in i["llm_sdks_mb"].items())
            lines += [
                "",
                f"A fresh venv and `pip install .` (no extras), as a user installs: **{i['disk_mb']} MB** of "
                f"site-packages on disk (as `du` counts; {i['site_packages_mb']} MB of file contents, "
                f"{i['without_venv_tools_mb']} MB without the venv's own pip and setuptools; largest, MB: "
                f"{largest}; the LLM SDKs, imported only when a provider is configured: {sdks} MB); torch "
                f"importable: {i['torch_importable']}.",
            ]
        else:  # a report from before disk_mb
            lines += [
                "",
                f"A fresh `pip install .` (no extras): **{i['site_packages_mb']} MB** of site-packages "
                f"(largest, MB: {largest}); torch importable: {i['torch_importable']}.",
            ]
    return "\n".join(lines + [""])
