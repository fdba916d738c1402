"""``markdown``: a folder of notes (an Obsidian vault, a docs folder) or one ``.md`` file.

Front matter (between ``---`` lines at the top) gives the title, the tags (``tags`` or ``tag``; a
list, a ``[a, b]`` list, or a comma- or space-separated string; a leading ``#`` dropped; and the
body's inline ``#tags``) and the date (``date``, ``created``, ``created_at``; else ``updated`` or
``modified``; ISO 8601 or a written date such as "March 2, 2026"); a note without front
matter takes its title from its first ``#`` heading or its file name. Each heading starts a section,
and each section is a memory "Title > Heading: text" (a section longer than one memory is ingested
as a document). ``[[Note|alias]]`` wikilinks become the linked note's name in the text, so the
entity extractor links the memory to it; ``![[embeds]]`` are dropped. Hidden folders
(``.obsidian/``, ``.trash/``) and template folders are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memlane.pipeline.importers.records import Fact, Record, Skip, WrongFormat, when

EXPECTS = "a folder of .md notes (or one .md file)"
_TEMPLATE_DIRS = {"templates", "template", "_templates", "templater"}
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_EMBED = re.compile(r"!\[\[[^\]]*\]\]")
_WIKILINK = re.compile(r"\[\[([^\]|#]*)(?:#[^\]|]*)?(?:\|([^\]]*))?\]\]")
_DATE_KEYS = ("date", "created", "created_at", "updated", "modified")
# An inline #tag (Obsidian's other spelling): after a space or at a line's start, not a heading.
_INLINE_TAG = re.compile(r"(?<![\w#/&])#([A-Za-z][\w/-]*)")


def notes(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    out = []
    for p in sorted(path.rglob("*.md")):
        parts = p.relative_to(path).parts[:-1]
        if any(d.startswith(".") or d.lower() in _TEMPLATE_DIRS for d in parts):
            continue
        out.append(p)
    return out


def detect(path: Path) -> str | None:
    if path.is_file():
        return "a Markdown note" if path.suffix.lower() in (".md", ".markdown") else None
    if not path.is_dir():
        return None
    found = notes(path)
    if not found:
        return None
    vault = " (an Obsidian vault)" if (path / ".obsidian").is_dir() else ""
    return f"a folder of {len(found)} Markdown note(s){vault}"


def read(path: Path) -> Iterator[Record]:
    found = notes(path)
    if not found:
        listing = ", ".join(sorted(p.name for p in path.iterdir())[:5]) if path.is_dir() else path.name
        raise WrongFormat(path, "markdown", EXPECTS, f"no .md notes ({listing or 'an empty folder'})")
    if path.is_dir():
        skipped = sum(1 for _ in path.rglob("*.md")) - len(found)
        if skipped:
            yield Skip("hidden or template folder", skipped)
    for p in found:
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            yield Skip("unreadable note")
            continue
        rel = p.name if path.is_file() else p.relative_to(path).as_posix()
        yield from _note(rel, p.stem, text)


def front_matter(text: str) -> tuple[dict[str, Any], str]:
    """The front matter's keys (a small YAML subset: scalars, [a, b] lists, "- item" lists) and the
    body after it; a note without front matter is all body."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return {}, text
    meta: dict[str, Any] = {}
    key = None
    for line in lines[1:end]:
        item = re.match(r"^\s+-\s*(.*)$", line)
        if item and key is not None:
            if not isinstance(meta.get(key), list):
                meta[key] = []
            meta[key].append(_scalar(item[1]))
            continue
        m = re.match(r"^([\w-]+)\s*:\s*(.*)$", line)
        if not m:
            continue
        key, value = m[1].lower(), m[2].strip()
        if value.startswith("[") and value.endswith("]"):
            meta[key] = [_scalar(v) for v in value[1:-1].split(",") if v.strip()]
        else:
            meta[key] = _scalar(value) if value else None
    return meta, "\n".join(lines[end + 1 :])


def _scalar(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _tags(meta: dict[str, Any]) -> tuple[str, ...]:
    raw = meta.get("tags", meta.get("tag"))
    if raw is None:
        return ()
    items = raw if isinstance(raw, list) else re.split(r"[,\s]+", str(raw))
    return tuple(t.strip().lstrip("#") for t in items if isinstance(t, str) and t.strip().lstrip("#"))


def _links(text: str) -> tuple[str, list[str]]:
    """Text with embeds dropped and wikilinks as the linked note's name; the names linked."""
    names: list[str] = []

    def name(m: re.Match[str]) -> str:
        target = m[1].strip().split("/")[-1]
        if target and target not in names:
            names.append(target)
        return target or (m[2] or "").strip()

    return _WIKILINK.sub(name, _EMBED.sub("", text)), names


def _note(rel: str, stem: str, text: str) -> Iterator[Record]:
    meta, body = front_matter(text)
    date = next((when(str(meta[k])) for k in _DATE_KEYS if meta.get(k)), None)
    title = str(meta.get("title") or "").strip()
    sections: list[tuple[str | None, list[str]]] = [(None, [])]
    for line in body.splitlines():
        h = _HEADING.match(line)
        if h:
            if not title and len(h[1]) == 1 and not any(s[1] for s in sections if "".join(s[1]).strip()):
                title = h[2].strip()
                continue
            sections.append((h[2].strip(), []))
        else:
            sections[-1][1].append(line)
    title = title or stem
    inline = [t for line in body.splitlines() if not _HEADING.match(line) for t in _INLINE_TAG.findall(line)]
    tags = tuple(dict.fromkeys([*_tags(meta), *inline]))
    stored = 0
    for i, (heading, lines) in enumerate(sections):
        body_text, linked = _links("\n".join(lines).strip())
        if not body_text.strip():
            continue
        where = f"{title} > {heading}" if heading else title
        metadata: dict[str, Any] = {"note": rel}
        if heading:
            metadata["section"] = heading
        if linked:
            metadata["links"] = linked
        stored += 1
        yield Fact(
            content=f"{where}: {body_text}",
            id=f"{rel}#{i}",
            occurred_at=date,
            tags=tags,
            metadata=metadata,
        )
    if not stored:
        yield Skip("empty note")
