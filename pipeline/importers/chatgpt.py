"""``chatgpt``: the ChatGPT data export's ``conversations.json`` (or, in newer exports, the split
``conversations-000.json``, ``conversations-001.json``, ... given their folder).

Each conversation is a tree (``mapping``: node id -> ``{message, parent, children}``): editing a
prompt or regenerating an answer adds a branch, and ``current_node`` is the leaf of the branch the
user last saw. Only that branch is imported, followed from ``current_node`` back to the root; the
messages of abandoned branches are counted as skipped. Hidden messages (system prompts, the
injected context, ``is_visually_hidden_from_conversation``) and the model's reasoning are skipped;
custom instructions (``user_editable_context``) are the user's preferences and are imported as
facts. Text comes from ``parts`` (strings, and the text of multimodal parts; images are skipped),
code cells, execution output and browsing results.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memlane.pipeline.importers.records import (
    Conversation,
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

EXPECTS = "conversations.json (a JSON list of conversations with 'mapping' and 'current_node'), or its folder"
_SKIPPED_TYPES = {
    "thoughts": "reasoning",
    "reasoning_recap": "reasoning",
    "model_editable_context": "hidden context",
    "system_error": "error message",
}


def files(path: Path) -> list[Path]:
    if path.is_dir():
        single = path / "conversations.json"
        return [single] if single.is_file() else sorted(path.glob("conversations-*.json"))
    return [path]


def detect(path: Path) -> str | None:
    found = files(path)
    if not found or not found[0].is_file():
        return None
    head = peek(found[0])
    if head.lstrip().startswith("[") and '"mapping"' in head and '"current_node"' in head:
        what = f"{len(found)} conversations file(s)" if path.is_dir() else "a conversations file"
        return f"{what} with message trees (mapping, current_node)"
    return None


def read(path: Path) -> Iterator[Record]:
    paths = files(path)
    if not paths:
        raise WrongFormat(
            path, "chatgpt", EXPECTS, "a folder without conversations.json or conversations-NNN.json"
        )
    for p in paths:
        data = load_json(p, "chatgpt", EXPECTS)
        if not isinstance(data, list) or (data and not (isinstance(data[0], dict) and "mapping" in data[0])):
            raise WrongFormat(p, "chatgpt", EXPECTS, shape(data))
        for conv in data:
            if isinstance(conv, dict) and isinstance(conv.get("mapping"), dict):
                yield from _conversation(conv)
            else:
                yield Skip("not a conversation")


def _branch(mapping: dict[str, Any], leaf: Any) -> list[dict[str, Any]]:
    """The nodes from the root to ``leaf``, in order (a cycle or a missing parent ends the walk)."""
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    node_id = leaf
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        path.append(node)
        node_id = node.get("parent")
    path.reverse()
    return path


def _leaf(conv: dict[str, Any]) -> Any:
    """``current_node``; without one (very old exports), the last node of the first-child chain."""
    mapping = conv["mapping"]
    if conv.get("current_node") in mapping:
        return conv["current_node"]
    roots = [k for k, n in mapping.items() if not n.get("parent")]
    node_id = roots[0] if roots else None
    while node_id is not None and mapping.get(node_id, {}).get("children"):
        node_id = mapping[node_id]["children"][-1]
    return node_id


def _conversation(conv: dict[str, Any]) -> Iterator[Record]:
    mapping: dict[str, Any] = conv["mapping"]
    branch = _branch(mapping, _leaf(conv))
    on_branch = {id(n) for n in branch}
    abandoned = sum(1 for n in mapping.values() if id(n) not in on_branch and n.get("message"))
    if abandoned:
        yield Skip("abandoned branch", abandoned)
    messages: list[Message] = []
    for node in branch:
        msg = node.get("message")
        if not isinstance(msg, dict):
            continue
        out = _message(msg)
        if isinstance(out, Message):
            messages.append(out)
        else:
            yield from out
    conv_id = str(conv.get("conversation_id") or conv.get("id") or "")
    started = when(conv.get("create_time"))
    if not conv_id:
        yield Skip("conversation without an id", len(messages) or 1)
    elif messages:
        yield Conversation(id=conv_id, messages=messages, started=started, title=conv.get("title"))


def _message(msg: dict[str, Any]) -> Message | list[Record]:
    role = (msg.get("author") or {}).get("role") or "unknown"
    content = msg.get("content") or {}
    ctype = content.get("content_type", "text")
    meta = msg.get("metadata") or {}
    if ctype == "user_editable_context":
        return _custom_instructions(content)
    if role == "system" or meta.get("is_visually_hidden_from_conversation"):
        return [Skip("hidden system message")]
    if ctype in _SKIPPED_TYPES:
        return [Skip(_SKIPPED_TYPES[ctype])]
    text = _text(content, ctype)
    if text is None:
        return [Skip(f"content type {ctype}")]
    if not text.strip():
        return [Skip("empty message")]
    return Message("tool" if role == "tool" or ctype == "execution_output" else role, text.strip())


def _text(content: dict[str, Any], ctype: str) -> str | None:
    if ctype in ("text", "multimodal_text"):
        pieces = []
        for part in content.get("parts") or []:
            if isinstance(part, str):
                pieces.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                pieces.append(part["text"])  # audio transcriptions and other parts with text
            # images and files (asset pointers) carry no text
        return "\n".join(pieces)
    if ctype == "code":
        lang = content.get("language") or ""
        code = content.get("text") or ""
        return f"```{lang if lang != 'unknown' else ''}\n{code}\n```" if code.strip() else ""
    if ctype == "execution_output":
        return str(content.get("text") or "")
    if ctype == "tether_browsing_display":
        return str(content.get("result") or content.get("summary") or "")
    if ctype == "tether_quote":
        return "\n".join(str(content.get(k) or "") for k in ("title", "text")).strip()
    if isinstance(content.get("text"), str):
        return str(content["text"])
    return None


def _custom_instructions(content: dict[str, Any]) -> list[Record]:
    """The two custom-instruction fields, as the user's preferences (one fact each; the same in
    every conversation of the export, so the import stores them once)."""
    profile = str(content.get("user_profile") or "").strip()
    wishes = str(content.get("user_instructions") or "").strip()
    out: list[Record] = []
    if profile:
        out.append(_preference("profile", f"About me (from my ChatGPT custom instructions): {profile}"))
    if wishes:
        out.append(
            _preference("instructions", f"How I want answers (from my ChatGPT custom instructions): {wishes}")
        )
    return out or [Skip("empty custom instructions")]


def _preference(kind: str, content: str) -> Fact:
    return Fact(
        content=content,
        id=f"custom-instructions:{kind}",
        category="preferences",
        tags=("custom-instructions",),
    )
