"""A client's JSON config file, edited without losing anything of the user's: ``memlane setup``'s
file half (``setup`` decides what the entry is; this reads, renders and writes the file).

- Read strictly: a file that is not JSON, or whose top level is not an object, is refused, never
  rewritten. A file that would parse once its comments and trailing commas were removed (JSONC, as
  VS Code allows) is refused with that reason: ``json`` cannot keep comments, and dropping a
  user's comments silently is worse than asking them to paste the entry by hand.
- Changed where it changes and nowhere else: the new text is the old one with one member spliced
  in, replaced or cut out (``_splice``), so every other byte (another server's one-line ``args``,
  the key order, blank lines, CRLF line ends, a byte-order mark) stays as it was. The entry is
  written in the file's own indentation (two spaces for a new file), one line per key, or on one
  line in a one-line object. The splice is checked: the spliced text must parse to exactly the
  expected data, in order; if it ever does not, the whole file is rendered from the data instead
  (the same content, re-indented).
- Written atomically (a temporary file in the same directory, then ``os.replace``), through a
  symlink to its target, with the old file's permissions; a timestamped copy of the old file is
  kept next to it first.

Standard library only, like ``setup``.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

BOM = b"\xef\xbb\xbf"
BACKUP_INFIX = ".memlane-backup-"
_DECODER = json.JSONDecoder()


class Refused(Exception):
    """The file cannot be edited safely; the message says why and what to do instead."""


@dataclass(frozen=True)
class ConfigFile:
    """One config file as found: its bytes (None when it does not exist), its parsed top level and
    the style it is written in."""

    path: Path
    raw: bytes | None
    data: dict[str, Any]
    indent: str = "  "
    newline: str = "\n"
    bom: bool = False
    final_newline: bool = True

    @property
    def exists(self) -> bool:
        return self.raw is not None

    def edited(self, key: str, name: str, entry: dict | None) -> bytes:
        """The file with ``data[key][name]`` set to ``entry`` (``key`` added when missing), or with
        that member removed when ``entry`` is None."""
        data = copy.deepcopy(self.data)
        if entry is None:
            del data[key][name]
        else:
            data.setdefault(key, {})[name] = entry
        text, new = self.text(), None
        if text.strip():
            try:
                new = self._splice(text, key, name, entry)
            except (ValueError, IndexError):
                new = None
            if new is not None and _ordered(json.loads(new)) != _ordered(data):
                new = None
        if new is None:
            new = json.dumps(data, indent=self.indent, ensure_ascii=False) + (
                "\n" if self.final_newline else ""
            )
            new = new.replace("\n", self.newline)
        return (BOM if self.bom else b"") + new.encode("utf-8")

    def text(self) -> str:
        """The file's current text (empty when it does not exist), for diffs."""
        return (self.raw or b"").removeprefix(BOM).decode("utf-8", errors="replace")

    def _splice(self, text: str, key: str, name: str, entry: dict | None) -> str:
        top = _skip_ws(text, 0)
        top_members, top_close = _members(text, top)
        servers = _last(top_members, key)
        if servers is None:  # no server map yet: add one holding the entry, as the last key
            return self._insert(text, top, top_members, top_close, key, {name: entry}, top=True)
        members, close = _members(text, servers.value_start)
        member = _last(members, name)
        if entry is None:
            if member is None:  # nothing to remove: the caller rewrites the whole file
                raise ValueError("no such member")
            i = members.index(member)
            if len(members) == 1:
                return text[: servers.value_start + 1] + text[close:]
            if i > 0:  # from the end of the previous value: its comma, the member
                return text[: members[i - 1].value_end] + text[member.value_end :]
            return text[: member.key_start] + text[members[1].key_start :]
        if member is not None:
            value = self._value(entry, _indent_of_line(text, member) if "\n" in member.lead else None)
            return text[: member.value_start] + value + text[member.value_end :]
        return self._insert(text, servers.value_start, members, close, name, entry, top=False)

    def _insert(self, text, open_, members, close, name, value, *, top: bool) -> str:
        """``"name": value`` as the last member of the object spanning ``open_``..``close``."""
        if members:
            last = members[-1]
            indent = _indent_of_line(text, last) if "\n" in last.lead else None
            piece = f",{last.lead}{json.dumps(name)}{last.colon}{self._value(value, indent)}"
            return text[: last.value_end] + piece + text[last.value_end :]
        if not top and "\n" not in text[:open_]:  # an empty map in a one-line file: stay on one line
            return f"{text[: open_ + 1]}{json.dumps(name)}: {self._value(value, None)}{text[close:]}"
        outer = text[text.rfind("\n", 0, open_) + 1 : open_]
        outer = outer[: len(outer) - len(outer.lstrip())]
        inner = outer + self.indent
        body = f"{self.newline}{inner}{json.dumps(name)}: {self._value(value, inner)}{self.newline}{outer}"
        return text[: open_ + 1] + body + text[close:]

    def _value(self, value: Any, indent: str | None) -> str:
        """``value`` as JSON for a member whose line starts with ``indent`` (None: on one line)."""
        if indent is None:
            return json.dumps(value, ensure_ascii=False)
        return json.dumps(value, indent=self.indent, ensure_ascii=False).replace("\n", self.newline + indent)


@dataclass(frozen=True)
class _Member:
    """Where one ``"key": value`` of an object is in the text: ``lead`` is the whitespace before
    the key, ``colon`` what separates it from the value."""

    key: str
    lead: str
    key_start: int
    colon: str
    value_start: int
    value_end: int


def _members(text: str, start: int) -> tuple[list[_Member], int]:
    """The members of the object whose ``{`` is at ``start``, and where its ``}`` is. The text is
    known to be JSON (``load`` parsed it); anything unexpected raises ValueError."""
    if text[start] != "{":
        raise ValueError("not an object")
    members: list[_Member] = []
    i = start + 1
    while True:
        lead_start, i = i, _skip_ws(text, i)
        if text[i] == "}" and not members:
            return members, i
        key, key_end = _DECODER.raw_decode(text, i)
        colon_end = _skip_ws(text, key_end)
        if text[colon_end] != ":":
            raise ValueError("no colon")
        value_start = _skip_ws(text, colon_end + 1)
        _, value_end = _DECODER.raw_decode(text, value_start)
        members.append(_Member(key, text[lead_start:i], i, text[key_end:value_start], value_start, value_end))
        i = _skip_ws(text, value_end)
        if text[i] == "}":
            return members, i
        if text[i] != ",":
            raise ValueError("no comma")
        i += 1


def _skip_ws(text: str, i: int) -> int:
    """Where the JSON whitespace that starts at ``i`` ends."""
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _last(members: list[_Member], key: str) -> _Member | None:
    """The member ``json.loads`` keeps when a key is repeated: the last."""
    return next((m for m in reversed(members) if m.key == key), None)


def _indent_of_line(text: str, member: _Member) -> str:
    return text[text.rfind("\n", 0, member.key_start) + 1 : member.key_start]


def _ordered(data: Any) -> str:
    return json.dumps(data, sort_keys=False)


def load(path: Path, *, hint: str) -> ConfigFile:
    """Read ``path``; a missing file is an empty object (``{}``), as is an empty one. Raises
    Refused when it is not a JSON object; ``hint`` (what to do instead) ends that message."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return ConfigFile(path, None, {})
    except OSError as e:
        raise Refused(f"cannot read {path}: {e.strerror}") from e
    bom = raw.startswith(BOM)
    try:
        text = raw.removeprefix(BOM).decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused(f"{path} is not UTF-8 text; memlane setup changes nothing in it. {hint}") from e
    if not text.strip():
        data: Any = {}
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            if _parses_as_jsonc(text):
                raise Refused(
                    f"{path} has comments or trailing commas (JSONC). memlane setup edits only strict "
                    f"JSON, so as not to drop them, and has changed nothing. {hint}"
                ) from e
            raise Refused(
                f"{path} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); memlane setup "
                f"has changed nothing. Fix the file, or: {hint}"
            ) from e
    if not isinstance(data, dict):
        raise Refused(
            f"{path} holds a JSON {type(data).__name__}, not an object; memlane setup has changed "
            f"nothing. {hint}"
        )
    return ConfigFile(
        path,
        raw,
        data,
        indent=_indent_of(text),
        newline="\r\n" if "\r\n" in text else "\n",
        bom=bom,
        final_newline=text.endswith("\n") or not text.strip(),
    )


def _indent_of(text: str) -> str:
    """The whitespace before the first indented key or value: a file's own indentation."""
    m = re.search(r"\n([ \t]+)\S", text)
    return m.group(1) if m else "  "


def _parses_as_jsonc(text: str) -> bool:
    """Whether ``text`` is JSON once ``//`` and ``/* */`` comments (outside strings) and trailing
    commas are removed. Only to choose the refusal's wording: the file is never written from this."""
    out, i, n, in_string = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(text[i : i + 2] if c == "\\" else c)
            i += 2 if c == "\\" else 1
            in_string = c != '"'
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        else:
            in_string = c == '"'
            out.append(c)
            i += 1
    stripped = re.sub(r",(\s*[}\]])", r"\1", "".join(out))  # may touch a string: wording only
    try:
        json.loads(stripped)
    except json.JSONDecodeError:
        return False
    return True


def backup(path: Path, now: datetime | None = None) -> Path:
    """Copy ``path`` (bytes, permissions and times) to ``<name>.memlane-backup-YYYYmmdd-HHMMSS``
    beside it, with ``-2``, ``-3``... when that name is taken (two runs in one second)."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}{BACKUP_INFIX}{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{BACKUP_INFIX}{stamp}-{n}")
    shutil.copy2(path, target)
    return target


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path``'s content with ``data`` in one step: a reader (the client, starting) sees
    the old file or the new one, never half of one. Through a symlink (a dotfiles repository), the
    target is written and the link kept. A new file gets the umask's permissions, as an editor's
    would; a changed one keeps its own (a config holding another server's API key may be 0600)."""
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
