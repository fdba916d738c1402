"""Time expressions in a question: the one parser intent analysis (and, with the temporal arm, the
retrieval stage) reads.

This finds the phrases; it does not yet turn them into date ranges. It is deliberately narrow:
words that only look like times are not read as one ("May I ask", "march on the capital",
"Will's car", "a second opinion"): a month name counts only next to a day, a year, or a word like
"in", "last", "since"; "second" and "minute" only with a number.
"""

from __future__ import annotations

import re

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
_UNITS = r"(?:day|week|month|year|hour|minute|second|decade|weekend)s?"
_NUMBER = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|a few|several|couple of)"
)
_SEASONS = r"(?:spring|summer|autumn|fall|winter)"
_WEEKDAYS = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_LEAD = r"(?:in|on|during|since|before|after|until|by|from|last|next|this|early|late|mid|between)"

_PATTERNS = [
    r"\b\d{4}-\d{2}-\d{2}\b",  # ISO dates
    r"\b\d{1,2}/\d{1,2}/\d{2,4}\b",
    rf"\b(?:{_LEAD}\s+)?(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})\b(?:,?\s+\d{{4}})?",
    rf"\b(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s+\d{{4}})?",
    rf"\b(?:{_MONTHS})\s+\d{{4}}\b",
    rf"\bbetween\s+(?:{_MONTHS}|(?:19|20)\d{{2}})\s+and\s+(?:{_MONTHS}|(?:19|20)\d{{2}})\b",
    rf"\b{_LEAD}\s+(?:{_MONTHS})\b(?:\s+\d{{1,2}}(?:st|nd|rd|th)?\b)?(?:,?\s+\d{{4}})?",
    rf"\b{_LEAD}\s+(?:the\s+)?(?:{_SEASONS}|{_WEEKDAYS})\b",
    rf"\b(?:last|next|this|past|previous|coming)\s+(?:few\s+)?{_UNITS}\b",
    rf"\b{_NUMBER}\s+{_UNITS}\s+(?:ago|before|after|later|earlier)\b",
    rf"\b(?:in|for|over|within)\s+the\s+(?:last|past|next)\s+{_NUMBER}?\s*{_UNITS}\b",
    r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|nowadays)\b",
    r"\bthe\s+(?:day|week|month|year)\s+(?:before|after)\b",
    r"\b(?:in|since|before|after|during|by|from|until)\s+(?:the\s+)?(?:early\s+|late\s+|mid-?)?(?:19|20)\d{2}s?\b",
    r"\b(?:19|20)\d{2}\b",
]
_FINDER = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE)


def find_time_expressions(text: str) -> list[str]:
    """The time phrases in ``text``, as written, in order, without overlaps."""
    return [m.group(0) for m in _FINDER.finditer(text)]
