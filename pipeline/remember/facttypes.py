"""Fact types, as in Hindsight's recall: every memory is one of

- ``world``: a fact about the world or about others ("Bob's birthday is on 14 July"),
- ``experience``: something the user or the assistant did or went through ("I fixed the slow
  query", "we rolled back release 4.2"),
- ``opinion``: a belief or judgement, whoever holds it ("Alice prefers raw SQL", "blue-green
  deploys are the safest way");
- ``instruction``: how the user wants things done, standing ("Always include version numbers when I
  ask about dependencies", "never use semicolons", "from now on, answer in French");
- ``preference``: the user's own preference ("I prefer simple, minimal dependencies", "I'd rather
  have tabs").

Instructions and preferences are what recall adds to a request they apply to even when they share
few words with it (``recall/instructions.py``), marked ``kind: "instruction"``.

The offline classifier reads cues, in this order: a standing instruction (a sentence that opens with
"always", "never", "from now on", "by default" ..., or asks for something "when I ask
about" a topic) and a first-person preference ("I prefer", "I'd rather"), neither in an
assistant's words; a first-person opinion verb ("I think", "I
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


# A standing instruction: a sentence that opens with one of these, then a verb-like word.
_INSTRUCTION = re.compile(
    r"(?:^|[.!?\n]\s*)(?:please\s+)?(?:always|never|don't ever|from now on,?|going forward,?|"
    r"in (?:the )?future,?|by default,?)\s+(?!mind\b)[a-z]",
    re.I,
)
# ... or one that says when it applies ("... when I ask about implementation details").
_WHEN_I_ASK = re.compile(r"\bwhen(?:ever)? I ask (?:you )?(?:about|for|how|to)\b", re.I)
_PREFERENCE = re.compile(
    r"\bI(?:'d|’d| would)? (?:really |generally |usually |strongly |much )?(?:prefer|rather)\b"
    r"|\bmy preference\b",
    re.I,
)
_ASSISTANT = re.compile(r"^\s*(assistant|ai)\s*:", re.I)


def instruction_type(text: str) -> str | None:
    """``instruction`` or ``preference`` when ``text`` says how its speaker wants things done,
    else None. An assistant's words are none: it restates what it was asked."""
    if _ASSISTANT.match(text):
        return None
    body = _SPEAKER.sub("", text)
    if _WHEN_I_ASK.search(body) or _INSTRUCTION.search(body):
        return "instruction"
    if _PREFERENCE.search(body):
        return "preference"
    return None


def classify(text: str) -> str:
    """The fact type of one memory, from cues in its words (see the module docstring)."""
    found = instruction_type(text)
    if found is not None:
        return found
    body = _SPEAKER.sub("", text)
    if _OPINION_VERB.search(body):
        return "opinion"
    for m in _EXPERIENCE.finditer(body):
        if m.group(1).lower() not in _NOT_PAST:
            return "experience"
    if _OPINION_MARKERS.search(body):
        return "opinion"
    return "world"
