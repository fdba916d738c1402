"""Likely secrets in memory text: provider API keys, private key blocks, passwords in URLs, JWTs and
high-entropy values next to words like "key", "token", "password", "secret".

``scan`` finds them; ``apply`` carries out ``[remember] secrets``: ``redact`` (the default)
replaces each with a typed placeholder (``[REDACTED:openai_key]``), ``refuse`` raises
``InvalidInput`` naming the kind (never the value), ``allow`` stores the text as given.
``MemoryInput.parse`` and ``MemoryPatch.parse`` call it on the content and on every string in the
metadata, so remember, update, the CLI, import and any later ingest path get it before anything is
embedded, stored or logged.

Precision over recall: each pattern is anchored on a provider prefix or a structure (PEM armour,
``user:pass@``, three base64url JSON segments), and the generic rule needs a keyword right before
the value, a value of 20+ characters mixing letters and digits, and high character entropy. UUIDs,
hex commit hashes, version strings and ordinary words are not touched
(tests/pipeline/remember/test_secrets.py).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, overload

from memlane.pipeline.errors import InvalidInput

MODES = ("redact", "refuse", "allow")

# (kind, pattern, group holding the secret; 0 = the whole match). Order matters: the first kind to
# claim a span keeps it (anthropic before openai, both prefixed "sk-").
_PATTERNS: list[tuple[str, re.Pattern[str], int]] = [
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        0,
    ),
    ("memlane_token", re.compile(r"(?<![\w-])mlt_[A-Za-z0-9_-]{43}(?![\w-])"), 0),
    ("anthropic_key", re.compile(r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{20,}"), 0),
    ("openai_key", re.compile(r"(?<![\w-])sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"), 0),
    ("stripe_key", re.compile(r"(?<![\w-])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"), 0),
    (
        "aws_access_key",
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}(?![A-Z0-9])"),
        0,
    ),
    (
        "aws_secret_key",
        re.compile(
            r"(?i:aws|secret.?access.?key)[\w .\"'-]{0,30}?[:=]\s*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        1,
    ),
    ("github_token", re.compile(r"(?<![\w])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{60,})"), 0),
    ("slack_token", re.compile(r"(?<![\w-])xox[abposr]-[A-Za-z0-9-]{10,}"), 0),
    ("google_api_key", re.compile(r"(?<![\w-])AIza[0-9A-Za-z_-]{35}"), 0),
    ("jwt", re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), 0),
    (
        "url_password",
        # scheme://user:password@host: only the password goes
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@]{1,100}:([^\s@/]{1,200})@[^\s@]"),
        1,
    ),
]

# The generic rule: a keyword, a short separator (": ", " = ", " is "), then the value.
_KEYWORDED = re.compile(
    r"(?i:\b(?:api[_ -]?key|access[_ -]?key|secret(?:[_ -]?key)?|token|password|passwd|pwd|passphrase|"
    r"credential|auth|bearer|key)s?\b)"
    r"(?:\s*(?:[:=]|=>|is|was|:=)\s*|\s+)[\"'`]?([A-Za-z0-9_\-+/=.~!@#$%^&*]{16,200})"
)


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")


def _looks_random(value: str) -> bool:
    """A generated credential rather than a word, a version, a UUID or a hex hash: 20+ characters,
    letters and digits mixed, high entropy."""
    v = value.rstrip(".,;:!?)\"'`")
    if len(v) < 20 or _UUID.match(v) or _HEX.match(v):
        return False
    if not (re.search(r"[A-Za-z]", v) and re.search(r"\d", v)):
        return False
    if re.fullmatch(r"[A-Za-z]+(?:[-_.][A-Za-z]+)*\d*", v):  # words joined, maybe a trailing number
        return False
    return entropy(v) >= 3.5


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    start: int
    end: int


def scan(text: str) -> list[Finding]:
    """Every likely secret in ``text``, non-overlapping, in order."""
    found: list[Finding] = []

    def free(a: int, b: int) -> bool:
        return all(b <= f.start or a >= f.end for f in found)

    for kind, pattern, group in _PATTERNS:
        for m in pattern.finditer(text):
            a, b = m.span(group)
            if a < b and free(a, b):
                found.append(Finding(kind, a, b))
    for m in _KEYWORDED.finditer(text):
        a, b = m.span(1)
        value = m.group(1).rstrip(".,;:!?)\"'`")
        b = a + len(value)
        if _looks_random(value) and free(a, b):
            found.append(Finding("secret", a, b))
    return sorted(found, key=lambda f: f.start)


def placeholder(kind: str) -> str:
    return f"[REDACTED:{kind}]"


def redact(text: str) -> tuple[str, Counter[str]]:
    """``text`` with each finding replaced by its placeholder, and the count per kind."""
    findings = scan(text)
    if not findings:
        return text, Counter()
    out, last = [], 0
    for f in findings:
        out.append(text[last : f.start])
        out.append(placeholder(f.kind))
        last = f.end
    out.append(text[last:])
    return "".join(out), Counter(f.kind for f in findings)


def apply(text: str, mode: str, where: str, counts: Counter[str]) -> str:
    """``[remember] secrets`` on one string: the text to store; adds what was found to ``counts``.
    ``refuse`` raises InvalidInput naming the kinds, never the values."""
    if mode == "allow":
        return text
    new, found = redact(text)
    if found and mode == "refuse":
        kinds = ", ".join(f"{k.replace('_', ' ')}" for k in sorted(found))
        raise InvalidInput(
            f"{where} looks like it holds a secret ({kinds}); memlane does not store secrets "
            '([remember] secrets = "refuse"). Remove it, or describe where the secret lives instead '
            '("the deploy key is in the team vault").'
        )
    counts.update(found)
    return new


@overload
def apply_deep(value: str, mode: str, where: str, counts: Counter[str]) -> str: ...
@overload
def apply_deep(value: dict[str, Any], mode: str, where: str, counts: Counter[str]) -> dict[str, Any]: ...
def apply_deep(value: Any, mode: str, where: str, counts: Counter[str]) -> Any:
    """``apply`` on every string in a JSON value (metadata), keys included: a string stays a
    string and an object an object."""
    if isinstance(value, str):
        return apply(value, mode, where, counts)
    if isinstance(value, dict):
        return {apply(k, mode, where, counts): apply_deep(v, mode, where, counts) for k, v in value.items()}
    if isinstance(value, list):
        return [apply_deep(v, mode, where, counts) for v in value]
    return value


def report(counts: Counter[str]) -> list[dict[str, Any]]:
    """What a result says was redacted: ``[{"kind": ..., "count": n}]``, by kind."""
    return [{"kind": k, "count": n} for k, n in sorted(counts.items())]
