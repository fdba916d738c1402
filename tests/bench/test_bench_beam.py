"""``memlane bench beam``: a small conversation in BEAM's layout through the tool path, the figures
recomputed from the per-question rows, and the command's errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from memlane.bench import beam, report
from memlane.server.cli import main as cli
from memlane.server.settings import load

TURNS = [
    ("user", "I'm building a budget tracker in Flask with SQLite.", "March-01-2024"),
    ("assistant", "Great: a Flask app with SQLite is a good start. Let's define the models first.", None),
    ("user", "Always include version numbers when I ask about libraries used.", None),
    ("assistant", "Understood, I will include version numbers for libraries.", None),
    ("user", "I moved the database from SQLite to PostgreSQL 16.", "March-20-2024"),
    (
        "assistant",
        "Moving to PostgreSQL 16 gives you better concurrency; update the connection string.",
        None,
    ),
    ("user", "I deployed the budget tracker to a VPS with gunicorn.", "April-02-2024"),
    ("assistant", "Deploying with gunicorn behind nginx on a VPS works well.", None),
    ("user", "How should I structure the app as it grows?", None),
    (  # longer than the model's window: its end is found by its passages
        "assistant",
        " ".join(
            ["Split the views into blueprints and keep each blueprint's templates beside it."] * 30
            + [
                "For the reports page, cache the monthly totals in Redis so the charts load quickly.",
                "Rotate the nginx access logs weekly and keep four weeks of them on the server.",
                "Back up the PostgreSQL database every night to an object storage bucket in another region.",
            ]
        ),
        None,
    ),
]
QUESTIONS = {
    "information_extraction": [{"question": "How did I deploy the budget tracker?", "source_chat_ids": [6]}],
    "knowledge_update": [
        {
            "question": "Which database does my app use?",
            "source_chat_ids": {"original_info": [0], "updated_info": [4]},
        }
    ],
    "instruction_following": [{"question": "Which libraries does the project use?", "source_chat_ids": [2]}],
    "abstention": [{"question": "What is my cat called?", "source_chat_ids": []}],
}


@pytest.fixture
def folder(tmp_path):
    conv = tmp_path / "beam" / "1"
    conv.mkdir(parents=True)
    turns = []
    for i, (role, content, anchor) in enumerate(TURNS):
        t = {"role": role, "id": i, "content": content}
        if anchor:
            t["time_anchor"] = anchor
        turns.append(t)
    chat = [{"batch_number": 1, "time_anchor": "March-01-2024", "turns": [turns[:4], turns[4:]]}]
    (conv / "chat.json").write_text(json.dumps(chat))
    (conv / "questions.json").write_text(json.dumps(QUESTIONS))
    return tmp_path / "beam"


def test_a_conversation_through_the_tool_path(folder, database_url, tmp_path, embedder):
    settings = load(data_dir=tmp_path, database={"url": database_url})
    r = asyncio.run(beam.run(settings, folder, embedder=embedder, show_progress=False))
    assert r["benchmark"] == "beam" and r["data"] == {
        "source": "beam",
        "conversations": 1,
        "turns": len(TURNS),
        "questions": 3,  # abstention has no evidence
    }
    assert r["remember"]["calls"] == len(TURNS)
    long = f"assistant: {TURNS[-1][1]}"
    assert r["storage"]["memories"] == len(TURNS) and r["storage"]["memories_with_passages"] == 1
    assert r["storage"]["passages"] == len(embedder.passages(long)) > 0
    assert r["storage"]["passage_bytes_per_memory"] > 0
    # The long turn, asked for by a sentence of its end.
    assert beam.probe_sentence(embedder, long) in long[len(long) // 2 :]
    assert beam.probe_sentence(embedder, f"user: {TURNS[0][1]}") is None
    assert r["long_memories"]["probes"] == r["long_memories"]["long_turns"] == 1
    assert r["long_memories"]["hit@10"] == 1.0
    rows = r["questions"]
    for k in beam.K_VALUES:  # the headline is the rows' mean
        assert r["recall"][f"R@{k}"] == round(sum(q["recall"][k] for q in rows) / len(rows), 3)
    assert set(r["by_ability"]) == {"information_extraction", "knowledge_update", "instruction_following"}
    ku = next(q for q in rows if q["ability"] == "knowledge_update")
    assert r["knowledge_update_current_first"] == {"hits": int(ku["current_first"]), "questions": 1}
    assert ku["current_first"] == beam.current_first(ku["top"], {"original_info": (0,), "updated_info": (4,)})
    text = report.render(json.loads(json.dumps(r)))
    assert "| instruction following | 1 |" in text and "| **all** | 3 |" in text


def test_the_scores_of_one_question():
    assert beam.recall_at([4, 2, 9], (2, 7)) == {1: 0.0, 5: 0.5, 10: 0.5, 20: 0.5}
    assert beam.current_first([1, 4, 0], {"original_info": (0,), "updated_info": (4,)})
    assert not beam.current_first([0, 4], {"original_info": (0,), "updated_info": (4,)})
    assert beam.both_sides([3, 8], {"first_statement": (3,), "second_statement": (8,)})


def test_the_command_refuses_what_is_not_a_folder_of_conversations(tmp_path, capsys):
    assert cli.main(["bench", "beam", str(tmp_path / "missing")]) == 2
    assert "is not a folder of conversations" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["bench", "beam", str(tmp_path / "empty"), "--quiet"]) == 2
    assert "no conversation folders" in capsys.readouterr().err
