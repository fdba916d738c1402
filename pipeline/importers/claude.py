"""``claude``: the Claude.ai data export folder: ``conversations.json``, ``projects.json`` (or a
``projects/`` folder, one JSON file per project) and ``memories.json``.

A conversation is ``{"uuid", "name", "created_at", "chat_messages": [{"sender": "human" |
"assistant", "content": [blocks], "text", "attachments", ...}]}``. Its ``content`` blocks are read:
``text`` is imported, ``thinking``, ``tool_use`` and ``tool_result`` are skipped (the flat ``text``
field mixes thinking and "not supported" placeholders into the answer, so it is read only when a
message has no blocks). An attachment's ``extracted_content`` is part of the message. A project's
prompt (``prompt_template``) is an instruction and its description a fact, each a memory; its
documents are ingested as documents. The export's own memories (``conversations_memory`` and
``project_memories``) become one memory per paragraph.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memlane.pipeline.importers.records import (
    Conversation,
    Document,
    Fact,
    Message,
    Record,
    Skip,
    WrongFormat,
    load_json,
    peek,
    shape,
    when,
)

EXPECTS = "the Claude.ai export folder (conversations.json with chat_messages, projects.json, memories.json)"
_PLACEHOLDER = re.compile(
    r"^\s*```?\s*\n?This block is not supported on your current device yet\.?\s*\n?```?\s*$", re.M
)
_BLOCK_SKIPS = {"thinking": "thinking", "tool_use": "tool call", "tool_result": "tool result"}
_HEADING = re.compile(r"^\s*(?:#+\s*(.+?)|\*\*(.+?)\*\*)\s*$")


def _conversations_file(path: Path) -> Path | None:
    p = path / "conversations.json" if path.is_dir() else path
    return p if p.is_file() else None


def detect(path: Path) -> str | None:
    conv = _conversations_file(path)
    if conv is not None and '"chat_messages"' in peek(conv):
        return "a Claude.ai export (conversations with chat_messages)"
    if path.is_dir() and "conversations_memory" in peek(path / "memories.json"):
        return "a Claude.ai export (memories.json)"
    return None


def read(path: Path) -> Iterator[Record]:
    conv = _conversations_file(path)
    folder = path if path.is_dir() else path.parent
    memories = folder / "memories.json"
    projects = _projects(folder)
    if conv is None and not memories.is_file() and not projects:
        listing = ", ".join(sorted(p.name for p in path.iterdir())[:6]) if path.is_dir() else path.name
        raise WrongFormat(path, "claude", EXPECTS, listing or "an empty folder")
    names: dict[str, str] = {}
    for proj in projects:
        names[str(proj.get("uuid"))] = str(proj.get("name") or "")
        yield from _project(proj)
    if memories.is_file():
        yield from _memories(load_json(memories, "claude", EXPECTS), names)
    if conv is not None:
        data = load_json(conv, "claude", EXPECTS)
        if not isinstance(data, list) or (
            data and not (isinstance(data[0], dict) and "chat_messages" in data[0])
        ):
            raise WrongFormat(conv, "claude", EXPECTS, shape(data))
        for c in data:
            yield from _conversation(c)


def _projects(folder: Path) -> list[dict[str, Any]]:
    found: list[Any] = []
    single = folder / "projects.json"
    if single.is_file():
        data = load_json(single, "claude", EXPECTS)
        found = data if isinstance(data, list) else []
    elif (folder / "projects").is_dir():
        found = [load_json(p, "claude", EXPECTS) for p in sorted((folder / "projects").glob("*.json"))]
    return [p for p in found if isinstance(p, dict)]


def _project(p: dict[str, Any]) -> Iterator[Record]:
    if p.get("is_starter_project"):
        yield Skip("starter project")
        return
    uuid, name = str(p.get("uuid") or ""), str(p.get("name") or "").strip() or "untitled"
    at = when(p.get("created_at"))
    prompt = str(p.get("prompt_template") or "").strip()
    if prompt:
        yield Fact(
            content=f"Instructions for my Claude project {name}: {prompt}",
            id=f"project:{uuid}:prompt",
            occurred_at=at,
            category="instructions",
            metadata={"claude_project": name},
        )
    about = str(p.get("description") or "").strip()
    if about:
        yield Fact(
            content=f"Claude project {name}: {about}",
            id=f"project:{uuid}:description",
            occurred_at=at,
            metadata={"claude_project": name},
        )
    for doc in p.get("docs") or []:
        text = str((doc or {}).get("content") or "").strip()
        if not text:
            yield Skip("empty project document")
            continue
        yield Document(
            id=f"project:{uuid}:doc:{doc.get('uuid') or doc.get('filename')}",
            text=f"{doc.get('filename') or 'document'} (Claude project {name})\n\n{text}",
            at=when(doc.get("created_at")) or at,
        )


def _paragraphs(text: str) -> Iterator[tuple[str | None, str]]:
    """(the heading above it, paragraph) for each paragraph of a memory summary."""
    heading = None
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if not para:
            continue
        h = _HEADING.match(para)
        if h and "\n" not in para:
            heading = (h[1] or h[2]).strip()
            continue
        yield heading, para


def _memories(data: Any, projects: dict[str, str]) -> Iterator[Record]:
    for entry in data if isinstance(data, list) else [data]:
        if not isinstance(entry, dict):
            continue
        texts: list[tuple[str, str | None, Any]] = [
            ("conversations", None, entry.get("conversations_memory"))
        ]
        texts += [
            (f"project:{k}", projects.get(k) or k, v)
            for k, v in (entry.get("project_memories") or {}).items()
        ]
        for key, project, text in texts:
            if not isinstance(text, str) or not text.strip():
                continue
            for i, (heading, para) in enumerate(_paragraphs(text)):
                where = f"In my Claude project {project}: " if project else ""
                yield Fact(
                    content=f"{where}{para}",
                    id=f"memories:{key}#{i}",
                    category="memories",
                    metadata={"section": heading} if heading else {},
                )


def _conversation(c: Any) -> Iterator[Record]:
    if not isinstance(c, dict) or not isinstance(c.get("chat_messages"), list):
        yield Skip("not a conversation")
        return
    messages: list[Message] = []
    for m in c["chat_messages"]:
        if not isinstance(m, dict):
            continue
        text, skips = _message_text(m)
        yield from skips
        if text:
            role = "user" if m.get("sender") == "human" else str(m.get("sender") or "unknown")
            messages.append(Message(role, text))
        else:
            yield Skip("empty message")
    if messages and c.get("uuid"):
        yield Conversation(
            id=str(c["uuid"]), messages=messages, started=when(c.get("created_at")), title=c.get("name")
        )


def _message_text(m: dict[str, Any]) -> tuple[str, list[Record]]:
    parts: list[str] = []
    skips: list[Record] = []
    blocks = m.get("content")
    if isinstance(blocks, list) and blocks:
        for b in blocks:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "text" and isinstance(b.get("text"), str):
                parts.append(b["text"])
            else:
                skips.append(Skip(_BLOCK_SKIPS.get(str(kind), f"{kind} block")))
    elif isinstance(m.get("text"), str):
        parts.append(_PLACEHOLDER.sub("", m["text"]))
    for a in m.get("attachments") or []:
        extracted = str((a or {}).get("extracted_content") or "").strip()
        if extracted:
            parts.append(f"[attached {a.get('file_name') or 'file'}]\n{extracted}")
    return "\n".join(p.strip() for p in parts if p.strip()), skips
