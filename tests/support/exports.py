"""Small exports of other memory tools and chat apps, written from their documented or
source-verified shapes, each with the trap its importer must handle (pipeline/importers/)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

# -- ChatGPT: conversations.json ----------------------------------------------------------------


def _node(
    nid: str, parent: str | None, children: list[str], message: dict[str, Any] | None
) -> dict[str, Any]:
    return {"id": nid, "message": message, "parent": parent, "children": children}


def _msg(nid: str, role: str, content: dict[str, Any], t: float, **meta: Any) -> dict[str, Any]:
    return {
        "id": nid,
        "author": {"role": role, "name": None, "metadata": {}},
        "create_time": t,
        "update_time": None,
        "content": content,
        "status": "finished_successfully",
        "end_turn": True,
        "weight": 1.0,
        "metadata": meta,
        "recipient": "all",
    }


def _text(*parts: Any) -> dict[str, Any]:
    return {"content_type": "text", "parts": list(parts)}


CUSTOM = {
    "content_type": "user_editable_context",
    "user_profile": "I am a data engineer at a logistics company in Rotterdam.",
    "user_instructions": "Answer briefly and show SQL examples when they help.",
}
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def chatgpt_conversations() -> list[dict[str, Any]]:
    """Two conversations. The first has an edited prompt: the user's first version (about a
    mascot) and the answer to it are an abandoned branch; ``current_node`` is the end of the
    other. It also holds the hidden system node, custom instructions, a code cell with its
    output, a multimodal message (an image and text) and reasoning."""
    m = {
        "root": _node("root", None, ["sys"], None),
        "sys": _node(
            "sys",
            "root",
            ["ctx"],
            _msg("sys", "system", _text(""), T0, is_visually_hidden_from_conversation=True),
        ),
        "ctx": _node(
            "ctx", "sys", ["u1"], _msg("ctx", "user", CUSTOM, T0, is_visually_hidden_from_conversation=True)
        ),
        "u1": _node(
            "u1",
            "ctx",
            ["a1"],
            _msg(
                "u1",
                "user",
                _text(
                    "We decided to move the analytics warehouse from Redshift to ClickHouse in March because the "
                    "Redshift query costs doubled last year."
                ),
                T0 + 10,
            ),
        ),
        "a1": _node(
            "a1",
            "u1",
            ["u2-old", "u2"],
            _msg(
                "a1",
                "assistant",
                _text(
                    "Moving the warehouse to ClickHouse for cost reasons makes sense; plan the migration of the "
                    "dbt models first."
                ),
                T0 + 20,
            ),
        ),
        "u2-old": _node(
            "u2-old",
            "a1",
            ["a2-old"],
            _msg(
                "u2-old",
                "user",
                _text("Our team mascot is a purple giraffe named Gerald who guards the server room."),
                T0 + 30,
            ),
        ),
        "a2-old": _node(
            "a2-old",
            "u2-old",
            [],
            _msg(
                "a2-old",
                "assistant",
                _text("Gerald the purple giraffe sounds like an excellent guardian of the server room."),
                T0 + 40,
            ),
        ),
        "u2": _node(
            "u2",
            "a1",
            ["th"],
            _msg(
                "u2",
                "user",
                _text("The new ClickHouse cluster will run on three nodes in the Frankfurt data centre."),
                T0 + 50,
            ),
        ),
        "th": _node(
            "th",
            "u2",
            ["code"],
            _msg(
                "th",
                "assistant",
                {
                    "content_type": "thoughts",
                    "thoughts": [{"summary": "Sizing", "content": "Secret musing about zebras."}],
                },
                T0 + 55,
            ),
        ),
        "code": _node(
            "code",
            "th",
            ["out"],
            {
                **_msg(
                    "code",
                    "assistant",
                    {
                        "content_type": "code",
                        "language": "python",
                        "text": "nodes = 3\nreplicas_per_shard = 2\nprint(nodes * 64, 'GB RAM in the Frankfurt cluster')",
                    },
                    T0 + 60,
                ),
                "recipient": "python",
            },
        ),
        "out": _node(
            "out",
            "code",
            ["img"],
            _msg(
                "out",
                "tool",
                {"content_type": "execution_output", "text": "192 GB RAM in the Frankfurt cluster"},
                T0 + 61,
            ),
        ),
        "img": _node(
            "img",
            "out",
            ["a3"],
            _msg(
                "img",
                "user",
                {
                    "content_type": "multimodal_text",
                    "parts": [
                        {
                            "content_type": "image_asset_pointer",
                            "asset_pointer": "file-service://file-abc",
                            "width": 800,
                            "height": 600,
                        },
                        "This diagram shows our ingestion pipeline: Kafka feeds Flink, which writes into ClickHouse.",
                    ],
                },
                T0 + 70,
            ),
        ),
        "a3": _node(
            "a3",
            "img",
            [],
            _msg(
                "a3",
                "assistant",
                _text(
                    "With Flink writing into ClickHouse, use the ReplicatedMergeTree engine for the events table."
                ),
                T0 + 80,
            ),
        ),
    }
    first = {
        "title": "Warehouse migration",
        "create_time": T0,
        "update_time": T0 + 80,
        "mapping": m,
        "current_node": "a3",
        "conversation_id": "c0ffee00-0000-4000-8000-000000000001",
        "id": "c0ffee00-0000-4000-8000-000000000001",
        "default_model_slug": "gpt-4o",
        "is_archived": False,
    }
    m2 = {
        "root": _node("root", None, ["ctx"], None),
        "ctx": _node(
            "ctx",
            "root",
            ["u"],
            _msg("ctx", "user", CUSTOM, T0 + 86400, is_visually_hidden_from_conversation=True),
        ),
        "u": _node(
            "u",
            "ctx",
            ["a"],
            _msg(
                "u",
                "user",
                _text("My daughter Mila starts primary school in Delft this September."),
                T0 + 86410,
            ),
        ),
        "a": _node(
            "a",
            "u",
            [],
            _msg(
                "a",
                "assistant",
                _text("Congratulations to Mila on starting primary school in Delft this September!"),
                T0 + 86420,
            ),
        ),
    }
    second = {
        "title": "School",
        "create_time": T0 + 86400,
        "update_time": T0 + 86420,
        "mapping": m2,
        "current_node": "a",
        "conversation_id": "c0ffee00-0000-4000-8000-000000000002",
        "id": "c0ffee00-0000-4000-8000-000000000002",
    }
    return [first, second]


def write_chatgpt(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "conversations.json").write_text(json.dumps(chatgpt_conversations()))
    (folder / "user.json").write_text(json.dumps({"id": "user-1", "email": "someone@example.com"}))
    return folder


# -- Claude Code: ~/.claude/projects/<project>/<session>.jsonl ------------------------------------

SESSION = "5f0e3c1a-1111-4222-8333-444455556666"


def _cc(kind: str, n: int, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "parentUuid": f"u{n - 1}" if n else None,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/home/dev/payments",
        "sessionId": SESSION,
        "version": "1.0.80",
        "gitBranch": "main",
        "type": kind,
        "message": message,
        "uuid": f"u{n}",
        "timestamp": f"2026-02-03T10:0{n % 10}:00.000Z",
        **extra,
    }


def claude_code_lines() -> list[dict[str, Any]]:
    """One session: a summary line, a meta line, slash-command boilerplate, a user prompt, one
    assistant reply spread over three lines (a thinking block, a text block, a tool call) sharing
    ``message.id``, the tool's result, a final answer, a prompt with a system reminder."""
    return [
        {"type": "summary", "summary": "Payments flaky test", "leafUuid": "u9"},
        _cc(
            "user",
            1,
            {
                "role": "user",
                "content": "Caveat: The messages below were generated by the user while running local commands. DO NOT respond to these messages.",
            },
            isMeta=True,
        ),
        _cc(
            "user",
            2,
            {
                "role": "user",
                "content": "<command-name>/clear</command-name>\n<command-message>clear</command-message>\n<command-args></command-args>",
            },
        ),
        _cc(
            "user",
            3,
            {
                "role": "user",
                "content": "The flaky test in the payments service is caused by a timezone bug in the invoice date parser; pin TZ=UTC in CI.",
            },
        ),
        _cc(
            "assistant",
            4,
            {
                "id": "msg_01A",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Private reasoning about quokkas and the parser.",
                        "signature": "sig",
                    }
                ],
            },
            requestId="req_1",
        ),
        _cc(
            "assistant",
            5,
            {
                "id": "msg_01A",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {
                        "type": "text",
                        "text": "I will set TZ=UTC in the CI workflow and add a regression test for invoice dates around midnight.",
                    }
                ],
            },
            requestId="req_1",
        ),
        _cc(
            "assistant",
            6,
            {
                "id": "msg_01A",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Edit",
                        "input": {
                            "file_path": "/home/dev/payments/.github/workflows/ci.yml",
                            "old_string": "env:",
                            "new_string": "env:\n  TZ: UTC  # walrus-marker",
                        },
                    }
                ],
            },
            requestId="req_1",
        ),
        _cc(
            "user",
            7,
            {
                "role": "user",
                "content": [
                    {
                        "tool_use_id": "toolu_1",
                        "type": "tool_result",
                        "content": "The file was updated (walrus-marker).",
                    }
                ],
            },
            toolUseResult={"filePath": "/home/dev/payments/.github/workflows/ci.yml"},
        ),
        _cc(
            "assistant",
            8,
            {
                "id": "msg_01B",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {
                        "type": "text",
                        "text": "Done: the CI workflow now exports TZ=UTC, and test_invoice_dates covers the midnight case.",
                    }
                ],
            },
        ),
        _cc(
            "user",
            9,
            {
                "role": "user",
                "content": "<system-reminder>Internal reminder text about todo lists.</system-reminder>Next, the refund endpoint must return HTTP 409 when a refund is already pending.",
            },
        ),
        {"type": "file-history-snapshot", "messageId": "u9", "snapshot": {}},
    ]


def write_claude_code(root: Path) -> Path:
    project = root / "-home-dev-payments"
    project.mkdir(parents=True, exist_ok=True)
    (project / f"{SESSION}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in claude_code_lines()))
    return root


# -- server-memory: memory.jsonl ------------------------------------------------------------------


def server_memory_lines() -> list[dict[str, Any]]:
    """Two entities, a relation between them, and a relation whose one end (Bob Martins) is not an
    entity of the file: the fact that Bob mentors Alice is stated only by that relation."""
    return [
        {
            "type": "entity",
            "name": "Alice Chen",
            "entityType": "person",
            "observations": ["Leads the payments team", "Prefers asynchronous code reviews over meetings"],
        },
        {
            "type": "entity",
            "name": "Acme Logistics",
            "entityType": "organization",
            "observations": ["Headquartered in Utrecht"],
        },
        {"type": "relation", "from": "Alice Chen", "to": "Acme Logistics", "relationType": "works_at"},
        {"type": "relation", "from": "Bob Martins", "to": "Alice Chen", "relationType": "mentors"},
    ]


def write_server_memory(path: Path) -> Path:
    path.write_text(
        "\n".join(json.dumps(x) for x in server_memory_lines())
    )  # the server writes no final newline
    return path


# -- mcp-memory-service: sqlite_vec.db ------------------------------------------------------------

MMS_SCHEMA = """
CREATE TABLE metadata (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    content_hash TEXT UNIQUE NOT NULL,
    content TEXT NOT NULL,
    tags TEXT,
    memory_type TEXT,
    metadata TEXT,
    created_at REAL,
    updated_at REAL,
    created_at_iso TEXT,
    updated_at_iso TEXT,
    deleted_at REAL DEFAULT NULL,
    parent_id TEXT,
    version INTEGER DEFAULT 1,
    confidence REAL DEFAULT 1.0,
    last_accessed INTEGER,
    superseded_by TEXT
);
"""


def write_mcp_memory_service(path: Path) -> Path:
    """Its schema as of v10 (deleted_at, superseded_by); three live memories, one deleted, one
    superseded by a newer version."""
    rows = [
        (
            "h1",
            "The staging database is refreshed from production every Sunday night.",
            "ops,database",
            "note",
            {"source": "cli"},
            1767312000.0,
            None,
            None,
        ),
        (
            "h2",
            "Decision: we use Terraform modules from the platform team for every new service.",
            "decision,infra",
            "decision",
            {},
            1767398400.0,
            None,
            None,
        ),
        (
            "h3",
            "The on-call rotation changes every Tuesday at 10:00.",
            "oncall",
            "reference",
            {},
            1767484800.0,
            None,
            None,
        ),
        (
            "h4",
            "The wiki password hint is the name of the office cat Biscuit.",
            "secret",
            "note",
            {},
            1767571200.0,
            1767600000.0,
            None,
        ),
        ("h5", "Deploys are frozen on Fridays after noon.", "deploy", "policy", {}, 1767657600.0, None, "h6"),
    ]
    conn = sqlite3.connect(path)
    conn.executescript(MMS_SCHEMA)
    conn.execute("INSERT INTO metadata VALUES ('distance_metric', 'cosine')")
    for h, content, tags, kind, meta, created, deleted, by in rows:
        conn.execute(
            "INSERT INTO memories (content_hash, content, tags, memory_type, metadata, created_at, updated_at,"
            " created_at_iso, updated_at_iso, deleted_at, superseded_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (h, content, tags, kind, json.dumps(meta), created, created, None, None, deleted, by),
        )
    conn.commit()
    conn.close()
    return path


# -- mem0: get_all output ---------------------------------------------------------------------------


def mem0_items() -> list[dict[str, Any]]:
    return [
        {
            "id": "8d3f0c4e-1b2a-4c5d-9e8f-000000000001",
            "memory": "Is allergic to peanuts",
            "hash": "a1",
            "metadata": {"confidence": "high"},
            "categories": ["health"],
            "created_at": "2026-01-10T09:00:00-08:00",
            "updated_at": "2026-01-10T09:00:00-08:00",
            "user_id": "maria",
        },
        {
            "id": "8d3f0c4e-1b2a-4c5d-9e8f-000000000002",
            "memory": "Plays cello in a community orchestra on Thursdays",
            "hash": "a2",
            "metadata": None,
            "categories": ["hobbies"],
            "created_at": "2026-01-11T18:30:00-08:00",
            "updated_at": None,
            "user_id": "maria",
        },
        {
            "id": "8d3f0c4e-1b2a-4c5d-9e8f-000000000003",
            "memory": "Prefers vegetarian restaurants",
            "hash": "a3",
            "metadata": {},
            "created_at": "2026-01-12T12:00:00-08:00",
            "updated_at": None,
            "user_id": "maria",
            "agent_id": "concierge",
        },
    ]


def write_mem0(path: Path, shape: str = "results") -> Path:
    items = mem0_items()
    data: Any = {"results": items}
    if shape == "list":
        data = items
    elif shape == "page":
        data = {"count": len(items), "next": None, "previous": None, "results": items}
    path.write_text(json.dumps(data, indent=2))
    return path


# -- markdown: an Obsidian vault ------------------------------------------------------------------


def write_vault(root: Path) -> Path:
    """A note with front matter, sections and wikilinks; a note without front matter; the app's
    settings folder and a template, which are not notes."""
    (root / ".obsidian").mkdir(parents=True, exist_ok=True)
    (root / ".obsidian" / "app.json").write_text("{}")
    (root / ".obsidian" / "workspace.md").write_text("# not a note")
    (root / "Templates").mkdir(exist_ok=True)
    (root / "Templates" / "Daily.md").write_text(
        "---\ntags: daily\n---\n# {{date}}\n\nTemplate body about otters."
    )
    (root / "Projects").mkdir(exist_ok=True)
    (root / "Projects" / "Project Atlas.md").write_text(
        "---\ntitle: Project Atlas\ntags:\n  - project\n  - '#infra'\ndate: 2026-03-02\n---\n"
        "Atlas replaces the legacy route planner for the Rotterdam depot.\n\n"
        "## Decisions\n\nWe chose PostGIS for the road graph; [[Alice Chen|Alice]] signed off on it.\n\n"
        "## Risks\n\nThe vendor map licence expires in October.\n"
    )
    (root / "Inbox.md").write_text(
        "# Reading list\n\nFinish Designing Data-Intensive Applications before the June offsite.\n"
    )
    (root / "Journal").mkdir(exist_ok=True)
    (root / "Journal" / "Offsite.md").write_text(
        "---\nTags: planning, offsite\nCreated: March 2, 2026\n---\n"
        "The June offsite is in Scheveningen; book the train by May. #travel\n"
    )
    return root


# -- claude: the Claude.ai export folder ------------------------------------------------------------


def write_claude(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    conv = {
        "uuid": "a1b2c3d4-0000-4000-8000-00000000c001",
        "name": "Conference talk",
        "created_at": "2026-02-10T08:00:00.000000Z",
        "updated_at": "2026-02-10T08:10:00.000000Z",
        "account": {"uuid": "acct-1"},
        "chat_messages": [
            {
                "uuid": "m1",
                "sender": "human",
                "created_at": "2026-02-10T08:00:00.000000Z",
                "text": "My talk at PyCon Lisbon is on May 14; the abstract is attached.",
                "content": [
                    {
                        "type": "text",
                        "text": "My talk at PyCon Lisbon is on May 14; the abstract is attached.",
                    }
                ],
                "attachments": [
                    {
                        "file_name": "abstract.txt",
                        "file_size": 120,
                        "file_type": "txt",
                        "extracted_content": "Abstract: incremental view maintenance in DuckDB for streaming dashboards.",
                    }
                ],
                "files": [{"file_name": "abstract.txt"}],
            },
            {
                "uuid": "m2",
                "sender": "assistant",
                "created_at": "2026-02-10T08:01:00.000000Z",
                "text": "Pondering pelicans privately.\n\nFor a PyCon Lisbon talk on May 14, open with a live DuckDB demo of a dashboard updating.",
                "content": [
                    {"type": "thinking", "thinking": "Pondering pelicans privately."},
                    {
                        "type": "text",
                        "text": "For a PyCon Lisbon talk on May 14, open with a live DuckDB demo of a dashboard updating.",
                    },
                ],
                "attachments": [],
                "files": [],
            },
        ],
    }
    (folder / "conversations.json").write_text(json.dumps([conv]))
    (folder / "projects.json").write_text(
        json.dumps(
            [
                {
                    "uuid": "p-1",
                    "name": "Garden planner",
                    "description": "Planning the allotment beds for 2026.",
                    "is_private": True,
                    "is_starter_project": False,
                    "prompt_template": "Always give planting dates for the Dutch climate zone.",
                    "created_at": "2026-01-05T10:00:00Z",
                    "updated_at": "2026-01-05T10:00:00Z",
                    "docs": [
                        {
                            "uuid": "d-1",
                            "filename": "beds.md",
                            "content": "Bed 3 gets the tomatoes; bed 4 rests under clover this year.",
                            "created_at": "2026-01-05T10:00:00Z",
                        }
                    ],
                },
            ]
        )
    )
    (folder / "memories.json").write_text(
        json.dumps(
            [
                {
                    "conversations_memory": "**Work context**\n\nSam is a staff engineer at a Dutch fintech and maintains its fraud-scoring service.\n\n"
                    "**Personal context**\n\nSam cycles to work and is training for the Amsterdam marathon in October.",
                    "project_memories": {"p-1": "The allotment is in Delfgauw, plot 17."},
                    "account_uuid": "acct-1",
                },
            ]
        )
    )
    (folder / "users.json").write_text(json.dumps([{"uuid": "acct-1", "full_name": "Sam"}]))
    return folder
