"""``memlane bench import``: ``memlane import --from chatgpt`` on a generated ChatGPT export.

``generate`` writes a ``conversations.json`` in the export's shape (a message tree per conversation,
``current_node``, a hidden system node and the custom instructions at the root) with ``messages``
messages on the current branches, in conversations of ``per_conversation``; every conversation
also holds one edited prompt whose first version and answer are an abandoned branch. User turns
state the latency benchmark's seeded facts (``corpus.py``); the assistant acknowledges and
restates part of each. The run imports the file twice into a fresh project, timed, the second run
must store nothing, and records the process's peak resident memory (the model and the database
client included) before and after.
"""

from __future__ import annotations

import json
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memlane.bench.common import bench_engine, config_snapshot, progress, versions
from memlane.bench.corpus import Corpus
from memlane.pipeline.importers import chatgpt
from memlane.pipeline.importers.run import Importer, ImportReport

START = 1735689600.0  # 2025-01-01T00:00:00Z


def _node(nid: str, parent: str | None, role: str | None, text: str, t: float, **meta: Any) -> dict[str, Any]:
    message = None
    if role is not None:
        content: dict[str, Any] = {"content_type": "text", "parts": [text]}
        if meta.pop("custom", False):
            content = {
                "content_type": "user_editable_context",
                "user_profile": "I run the data platform team.",
                "user_instructions": "Keep answers short.",
            }
        message = {
            "id": nid,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": t,
            "content": content,
            "status": "finished_successfully",
            "metadata": meta,
            "recipient": "all",
        }
    return {"id": nid, "message": message, "parent": parent, "children": []}


def _add(mapping: dict[str, dict[str, Any]], node: dict[str, Any]) -> str:
    mapping[node["id"]] = node
    if node["parent"] is not None:
        mapping[node["parent"]]["children"].append(node["id"])
    return str(node["id"])


def generate(messages: int, per_conversation: int = 20, seed: int = 7) -> list[dict[str, Any]]:
    facts = iter(Corpus(seed).take(messages))
    out = []
    t = START
    for c in range(0, messages, per_conversation):
        n = min(per_conversation, messages - c)
        mapping: dict[str, dict[str, Any]] = {}

        last = _add(mapping, _node(f"{c}-root", None, None, "", t))
        last = _add(
            mapping, _node(f"{c}-sys", last, "system", "", t, is_visually_hidden_from_conversation=True)
        )
        last = _add(
            mapping,
            _node(f"{c}-ctx", last, "user", "", t, custom=True, is_visually_hidden_from_conversation=True),
        )
        for i in range(n):
            t += 30
            if i % 2 == 0:
                text = next(facts).content
                if i == 2:  # the edited prompt: its first version and answer are abandoned
                    old = _add(
                        mapping,
                        _node(
                            f"{c}-{i}-old", last, "user", f"Draft question {c}: what about the old plan?", t
                        ),
                    )
                    _add(
                        mapping,
                        _node(f"{c}-{i}-oldreply", old, "assistant", "The old plan was dropped.", t + 1),
                    )
                last = _add(mapping, _node(f"{c}-{i}", last, "user", text, t))
            else:
                said = next(facts, None)
                reply = f"Noted. Also worth keeping in mind: {said.content}" if said else "Noted."
                last = _add(mapping, _node(f"{c}-{i}", last, "assistant", reply, t))
        cid = f"00000000-0000-4000-8000-{c:012d}"
        out.append(
            {
                "title": f"Conversation {c // per_conversation}",
                "create_time": START + c * 60,
                "update_time": t,
                "mapping": mapping,
                "current_node": last,
                "conversation_id": cid,
                "id": cid,
            }
        )
        t += 3600
    return out


def _peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024 * 1024 if sys.platform == "darwin" else 1024), 1)


async def run(
    settings, messages: int, *, seed: int = 7, embedder=None, show_progress: bool = True
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memlane-bench-import-") as tmp:
        path = Path(tmp) / "conversations.json"
        t0 = time.perf_counter()
        path.write_text(json.dumps(generate(messages, seed=seed)), encoding="utf-8")
        generated_s = time.perf_counter() - t0
        size_mib = round(path.stat().st_size / 2**20, 1)
        async with bench_engine(settings, embedder=embedder) as ctx:
            ctx.engine.runtime.warm()
            project = ctx.project("import")
            rss_before = _peak_rss_mib()
            runs: dict[str, Any] = {}
            for name in ("first", "second"):
                report = ImportReport("chatgpt")
                conversations = -(-messages // 20)
                with progress(conversations, f"import ({name})", show_progress, unit="conv") as bar:
                    importer = Importer(
                        ctx.engine, report, source_name=path.name, project=project, progress=bar.update
                    )
                    t0 = time.perf_counter()
                    await importer.run(chatgpt.read(path))
                    seconds = time.perf_counter() - t0
                runs[name] = {
                    "seconds": round(seconds, 1),
                    "messages_per_s": round(messages / seconds, 1),
                    **{k: v for k, v in report.as_dict().items() if k != "format"},
                }
            stored = (await ctx.engine.store.stats())["memories"]
            cfg = config_snapshot(ctx, messages=messages, seed=seed, per_conversation=20)
            vers = await versions(ctx.engine)
    return {
        "benchmark": "import",
        "export": {"messages": messages, "file_mib": size_mib, "generated_s": round(generated_s, 1)},
        "runs": runs,
        "memories_after": stored,
        "peak_rss_mib": {"before_import": rss_before, "after_import": _peak_rss_mib()},
        "config": cfg,
        "versions": vers,
    }


def markdown(r: dict[str, Any]) -> str:
    e, rss = r["export"], r["peak_rss_mib"]
    lines = [
        f"## memlane import --from chatgpt: {e['messages']} messages ({e['file_mib']} MiB conversations.json)",
        "",
        "| run | seconds | messages/s | read | stored | duplicate | filtered | skipped |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, x in r["runs"].items():
        lines.append(
            f"| {name} | {x['seconds']} | {x['messages_per_s']} | {x['read']} | {x['stored']} | "
            f"{x['duplicate']} | {x['filtered']} | {x['skipped']} |"
        )
    lines += [
        "",
        f"Peak resident memory of the process: {rss['before_import']} MiB before the import (model and "
        f"database client loaded), {rss['after_import']} MiB after both runs. Memories stored: "
        f"{r['memories_after']}.",
    ]
    return "\n".join(lines) + "\n"
