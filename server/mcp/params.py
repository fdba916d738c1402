"""The tools' parameters as the client's model reads them: each type with its description, defined
once. A tool's signature names them (``content: p.Content``); defaults stay in the signature.

Reworded descriptions change what every agent reads: keep them short, and say what an omitted
value means.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

FactTypeName = Literal["world", "experience", "opinion", "instruction", "preference"]

# -- shared by several tools ----------------------------------------------------------------------

MemoryId = Annotated[
    str,
    Field(description="The memory's id or a unique start of it (8+ hex digits), as recall returns it."),
]
Project = Annotated[str | None, Field(description="Project to file it under; omitted = the default project.")]

# -- remember -------------------------------------------------------------------------------------

Content = Annotated[
    str, Field(description="The fact, preference, decision or event, as a self-contained sentence.")
]
Category = Annotated[
    str | None, Field(description="e.g. preference, decision, fact, person, incident, todo.")
]
Tags = Annotated[list[str] | None, Field(description="Short labels to filter by later.")]
Pinned = Annotated[bool, Field(description="Pinned memories are meant to be always relevant.")]
Priority = Annotated[int | None, Field(description="1 (low) to 5 (critical); default 3.")]
OccurredAt = Annotated[
    str | None, Field(description="When it happened, ISO 8601 (2024-05-08 or 2024-05-08T13:56:00Z).")
]
ExpiresAt = Annotated[
    str | None, Field(description="When it stops being true, ISO 8601; recall ignores it after.")
]
Metadata = Annotated[
    dict[str, Any] | None, Field(description="Any JSON object; stored and returned as given.")
]
FactType = Annotated[
    FactTypeName | None,
    Field(
        description="world: a fact about the world or others; experience: something the user or you "
        "did or went through; opinion: a belief or judgement; instruction: how the user wants things "
        'done, standing ("always ..."); preference: the user\'s own preference ("I prefer ..."). '
        "Omitted: classified."
    ),
]

# -- ingest ---------------------------------------------------------------------------------------

Text = Annotated[
    str,
    Field(
        description="A conversation ('Speaker: text' lines, or a JSON list of {role, content} "
        "messages) or a document."
    ),
]
Kind = Annotated[
    Literal["conversation", "document"],
    Field(description="conversation: one piece per turn; document: chunks of about 256 tokens."),
]
RememberSource = Annotated[
    str | None,
    Field(
        description="The conversation, session or document this memory comes from (e.g. the chat's id). "
        "Pass the same value for every memory of one conversation: they are linked in order. Without it, "
        "memories remembered one after another in a project are linked while they are close in time."
    ),
]
IngestSource = Annotated[
    str | None,
    Field(description="Name of the conversation or document; default 'ingest:' + a hash of the text."),
]
EveryPieceOccurredAt = Annotated[
    str | None, Field(description="When it happened, ISO 8601; applies to every piece.")
]
EveryPieceCategory = Annotated[str | None, Field(description="Category for every piece.")]
EveryPieceTags = Annotated[list[str] | None, Field(description="Tags for every piece.")]

# -- recall ---------------------------------------------------------------------------------------

Query = Annotated[str, Field(description="What you want to know, in words.")]
Projects = Annotated[
    str | list[str] | None,
    Field(
        description="Project to search; omitted = the default project. A list of projects, or '*' "
        "for every project you may read, searches them all, boosting current_project's memories."
    ),
]
Limit = Annotated[int | None, Field(description="At most this many memories (default 10).")]
MaxTokens = Annotated[
    int | None,
    Field(description="Token budget (cl100k) for this whole result as you read it (default 2000)."),
]
Budget = Annotated[
    Literal["low", "mid", "high"],
    Field(
        description="How much work recall may do: how far the graph arm expands, and the LLM stages' work."
    ),
]
Mode = Annotated[
    Literal["auto", "fast", "full"] | None,
    Field(
        description="auto: simple questions take the fast path (no query synthesis, HyDE or rerank); "
        "fast; full. Default: recall.mode (auto)."
    ),
]
ReferenceTime = Annotated[
    str | None, Field(description="'Now' for relative dates, ISO 8601; default: the actual now.")
]
OnlyCategory = Annotated[str | None, Field(description="Only memories of this category.")]
OnlyTags = Annotated[list[str] | None, Field(description="Only memories carrying all these tags.")]
OnlyTopics = Annotated[
    list[str] | None, Field(description="Only memories with at least one of these topics.")
]
OnlyFactTypes = Annotated[
    list[FactTypeName] | None,
    Field(
        description="Only memories of these fact types (world, experience, opinion, instruction, preference)."
    ),
]
Explain = Annotated[
    bool,
    Field(description="Also return full ids, scores and the pipeline trace (per-stage timings and counts)."),
]
CurrentProject = Annotated[
    str | None,
    Field(
        description="With several projects: the one you work in (+30%; others -20%). "
        "Default: the first listed (for '*', the default project)."
    ),
]
IncludeContext = Annotated[
    bool,
    Field(
        description="Also return each memory's previous/next neighbours in its conversation or "
        "document (within a share of max_tokens)."
    ),
]
AsOf = Annotated[
    str | None,
    Field(
        description="Answer as of this time (ISO 8601): the memories valid then come first, and a "
        "memory superseded since is not moved below its successor."
    ),
]
IncludeHistory = Annotated[
    bool,
    Field(
        description="Also return, with each memory that replaced others, its earlier versions "
        "(within a share of max_tokens)."
    ),
]
IncludeEntities = Annotated[
    bool,
    Field(
        description="Also return other key facts about the entities the memories mention "
        "(within a share of max_tokens)."
    ),
]

# -- update: only the fields passed change --------------------------------------------------------

NewContent = Annotated[str | None, Field(description="New text (re-embedded).")]
NewCategory = Annotated[str | None, Field(description="New category.")]
NewTags = Annotated[list[str] | None, Field(description="New tags (replace the old ones).")]
NewPinned = Annotated[bool | None, Field(description="Pin or unpin.")]
NewPriority = Annotated[int | None, Field(description="1 (low) to 5 (critical).")]
NewTime = Annotated[str | None, Field(description="ISO 8601.")]
NewMetadata = Annotated[dict[str, Any] | None, Field(description="New metadata (replaces the old object).")]
NewFactType = Annotated[FactTypeName | None, Field(description="New fact type.")]
