"""memlane's version: the installed package's, so pyproject's ``version`` is the one source. The
MCP server's serverInfo, the ``memlane://stats`` resource and ``memlane doctor`` report it."""

from __future__ import annotations

from importlib.metadata import version

VERSION = version("memlane")
