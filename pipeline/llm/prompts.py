"""Versioned prompt templates: ``prompts/<name>/v<N>.md``, one file per prompt and version.

A file starts with a header between ``---`` lines (``name``, ``version``, ``purpose``,
``variables``, ``output``), then a ``## system`` and a ``## user`` section. Variables are written
``{{name}}``; rendering is strict: a variable the template uses and the caller did not give, or one
the caller gave and the template does not use, is an error naming it.

A released version is never edited: ``prompts/prompts.lock`` records each version's sha256 and a
test fails when a file no longer matches it. A change is a new version file (and a new lock line,
``memlane prompts lock``). Every LLM call records ``name@vN#<sha8>`` in the trace.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from memlane.pipeline.errors import ConfigError

_VAR = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")
_FILE = re.compile(r"v(\d+)\.md")
HEADER_KEYS = ("name", "version", "purpose", "variables", "output")
LOCK_FILE = "prompts.lock"


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    version: int
    purpose: str
    variables: tuple[str, ...]
    output: str
    system: str
    user: str
    sha256: str

    @property
    def id(self) -> str:
        """What the trace records: ``name@vN#<first 8 hex of sha256>``."""
        return f"{self.name}@v{self.version}#{self.sha256[:8]}"

    def render(self, **values: str) -> tuple[str, str]:
        """(system, user) with every ``{{variable}}`` replaced; strict both ways."""
        missing = [v for v in self.variables if v not in values]
        unknown = [v for v in values if v not in self.variables]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"missing variable(s) {', '.join(missing)}")
            if unknown:
                parts.append(f"unknown variable(s) {', '.join(unknown)}")
            raise ConfigError(f"prompt {self.id}: {'; '.join(parts)} (it takes {', '.join(self.variables)})")

        def fill(text: str) -> str:
            return _VAR.sub(lambda m: str(values[m.group(1)]), text)

        return fill(self.system), fill(self.user)


def parse(text: str, *, where: str) -> Prompt:
    """Read one prompt file; every problem is a ConfigError naming the file."""
    m = re.match(r"---\n(.*?)\n---\n(.*)\Z", text, re.S)
    if not m:
        raise ConfigError(f"{where}: a prompt file starts with a header between '---' lines")
    header: dict[str, str] = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in HEADER_KEYS:
            raise ConfigError(f"{where}: header line {line!r} is not one of {', '.join(HEADER_KEYS)}")
        header[key.strip()] = value.strip()
    absent = [k for k in HEADER_KEYS if k not in header]
    if absent:
        raise ConfigError(f"{where}: header lacks {', '.join(absent)}")
    sections = re.split(r"^## (system|user)\s*$", m.group(2), flags=re.M)
    if len(sections) != 5 or sections[1] != "system" or sections[3] != "user":
        raise ConfigError(f"{where}: the template needs a '## system' then a '## user' section")
    system, user = sections[2].strip(), sections[4].strip()
    declared = tuple(v.strip() for v in header["variables"].split(",") if v.strip())
    used = set(_VAR.findall(system)) | set(_VAR.findall(user))
    if used != set(declared):
        raise ConfigError(
            f"{where}: variables declared ({', '.join(sorted(declared))}) and used "
            f"({', '.join(sorted(used))}) differ"
        )
    try:
        version = int(header["version"])
    except ValueError:
        raise ConfigError(f"{where}: version {header['version']!r} is not a number") from None
    return Prompt(
        name=header["name"],
        version=version,
        purpose=header["purpose"],
        variables=declared,
        output=header["output"],
        system=system,
        user=user,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


def _root() -> Traversable:
    return resources.files("memlane.prompts")


@functools.cache
def catalogue() -> dict[str, dict[int, Prompt]]:
    """Every packaged prompt, by name and version. Loaded once; a broken file fails here."""
    out: dict[str, dict[int, Prompt]] = {}
    for folder in _root().iterdir():
        if not folder.is_dir() or folder.name.startswith(("_", ".")):
            continue
        for entry in folder.iterdir():
            m = _FILE.fullmatch(entry.name)
            if not m:
                continue
            where = f"prompts/{folder.name}/{entry.name}"
            prompt = parse(entry.read_text(encoding="utf-8"), where=where)
            if prompt.name != folder.name or prompt.version != int(m.group(1)):
                raise ConfigError(f"{where}: its header says {prompt.name} v{prompt.version}")
            out.setdefault(prompt.name, {})[prompt.version] = prompt
    return out


def get(name: str, version: int | None = None) -> Prompt:
    """A prompt by name, at ``version`` or the newest one."""
    versions = catalogue().get(name)
    if not versions:
        raise ConfigError(f"no prompt named {name!r}; prompts: {', '.join(sorted(catalogue()))}")
    if version is None:
        return versions[max(versions)]
    if version not in versions:
        raise ConfigError(
            f"prompt {name} has no v{version}; versions: {', '.join(f'v{v}' for v in sorted(versions))}"
        )
    return versions[version]


def lock() -> dict[str, str]:
    """The recorded sha256 of every released version, ``{"intent@v1": "..."}``."""
    return json.loads(_root().joinpath(LOCK_FILE).read_text(encoding="utf-8"))


def unlocked_or_changed() -> tuple[list[str], list[str]]:
    """(versions missing from the lock, versions whose file no longer matches it)."""
    recorded = lock()
    missing, changed = [], []
    for name, versions in sorted(catalogue().items()):
        for version, prompt in sorted(versions.items()):
            key = f"{name}@v{version}"
            if key not in recorded:
                missing.append(key)
            elif recorded[key] != prompt.sha256:
                changed.append(key)
    return missing, changed
