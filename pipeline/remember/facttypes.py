"""Fact types, as in Hindsight's recall: every memory is one of

- ``world``: a fact about the world or about others ("Bob's birthday is on 14 July"),
- ``experience``: something the user or the assistant did or went through ("I fixed the slow
  query", "we rolled back release 4.2"),
- ``opinion``: a preference, belief or judgement, whoever holds it ("I prefer oat milk", "Alice
  prefers raw SQL", "blue-green deploys are the safest way").

The offline classifier reads cues, in this order: a first-person opinion verb ("I think", "I
prefer", "we love") makes an opinion; a first-person subject ("I", "we", "the user", "the
assistant", a leading "User:" speaker) with a past-tense action verb makes an experience; any other
opinion marker ("prefers", "should", "best", "worst", "overrated") makes an opinion; everything
else is world. The caller may set the type (``remember(fact_type=...)``, ``update``), and what the
caller set is never reclassified. With an LLM serving the ``topics`` stage (``[llm.stages.topics]``,
off by default), its fact type replaces the cues' answer (pipeline/remember/topics_llm.py).
"""

from __future__ import annotations

import re

# A conversational turn's speaker, dropped before the cues are read ("User: I went ...").
_SPEAKER = re.compile(r"^\s*(user|assistant|me|human|ai)\s*:\s*", re.I)
_FIRST_PERSON = r"(?:i|we|i've|we've|i'd|we'd|the user|user|the assistant|assistant|my team|our team)"
_OPINION_VERB = re.compile(
    rf"\b{_FIRST_PERSON}\s+(?:really\s+|still\s+|strongly\s+|do(?:n't| not)\s+)?"
    r"(?:think|thinks|believe|believes|feel|feels|prefer|prefers|love|loves|like|likes|hate|hates|"
    r"dislike|dislikes|enjoy|enjoys|reckon|guess|wish|want|wants|would rather|find)\b",
    re.I,
)
_IRREGULAR_PAST = (
    "went did made took ran met had got saw bought wrote rewrote built found left came spent tried "
    "set sent gave told said broke began drove flew ate drank slept won lost paid kept held brought "
    "thought caught taught fought sold read heard chose became forgot shut put cut hit quit rode swam "
    "sang sat stood understood overslept undertook"
).split()
_PAST = rf"(?:\w+ed|{'|'.join(_IRREGULAR_PAST)})"
_NOT_PAST = {"need", "seed", "feed", "speed", "bed", "red", "shed", "embed", "proceed", "succeed", "exceed"}
_EXPERIENCE = re.compile(
    rf"\b{_FIRST_PERSON}\s+(?:(?:have|has|had|just|finally|also|then|already|once|never|recently|"
    rf"first|both|all|been|actually)\s+){{0,2}}({_PAST})\b",
    re.I,
)
_OPINION_MARKERS = re.compile(
    r"\b(?:prefers?|preferred|preference|likes|loves|hates|dislikes|enjoys|favou?rite|recommends?|"
    r"should(?:n't)?|ought to|in my (?:opinion|view)|honestly|personally|"
    r"best|worst|better|worse|safest|easiest|simplest|overrated|underrated|overkill|worth|"
    r"ugly|nice|great|terrible|awful|excellent|amazing|beautiful|boring|annoying|confusing|useless|"
    r"pointless|brilliant|waste of|the most \w+|too \w+ to)\b",
    re.I,
)


def classify(text: str) -> str:
    """The fact type of one memory, from cues in its words (see the module docstring)."""
    body = _SPEAKER.sub("", text)
    if _OPINION_VERB.search(body):
        return "opinion"
    for m in _EXPERIENCE.finditer(body):
        if m.group(1).lower() not in _NOT_PAST:
            return "experience"
    if _OPINION_MARKERS.search(body):
        return "opinion"
    return "world"
