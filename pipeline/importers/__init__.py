"""Importers: what other memory tools and chat apps keep, read into memlane (``memlane import``).

One module per format, each a reader: ``detect(path)`` says what it found when the path is its
format, ``read(path)`` yields normalised records (``records.py``): a ``Conversation`` goes through
ingest, a ``Fact`` through remember, a ``Document`` through ingest as a document, a ``Skip`` is
counted with its reason. ``READERS`` names them; ``detect.py`` picks one for ``--from auto``;
``run.py`` hands the records to the engine and counts what happened.
"""

from __future__ import annotations

from types import ModuleType

from memlane.pipeline.importers import (
    chatgpt,
    claude,
    claude_code,
    markdown,
    mcp_memory_service,
    mem0,
    server_memory,
)

# ``memlane`` (our own JSONL export) is read by the CLI's import, which also restores supersessions.
READERS: dict[str, ModuleType] = {
    "server-memory": server_memory,
    "chatgpt": chatgpt,
    "claude": claude,
    "claude-code": claude_code,
    "mcp-memory-service": mcp_memory_service,
    "mem0": mem0,
    "markdown": markdown,
}
FORMATS = ("memlane", *READERS, "auto")
