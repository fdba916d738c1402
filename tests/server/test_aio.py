"""The event loop memlane's commands and ``memlane serve`` run on (server/aio.py)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from memlane.server import aio


async def _loop_module() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows build")
def test_commands_run_on_uvloop_where_it_is_installed():
    assert aio.loop_factory() is not None
    assert aio.run(_loop_module()).startswith("uvloop")


def test_without_uvloop_the_loop_is_asyncio_s_own(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert aio.loop_factory() is None
    assert aio.run(_loop_module()).startswith("asyncio")
