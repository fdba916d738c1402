"""What the ``memlane`` command prints for a person: a memory, a memory's history, doctor's checks,
the projects there are. The tools answer a model (JSON, and notes written for it); the command
answers whoever typed it, and ``--json`` gives the tools' shapes to scripts."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from memlane.pipeline.records import Memory
from memlane.pipeline.store.handles import handle_of

SNIPPET_CHARS = 80


def day(t: datetime | str | None) -> str | None:
    """The UTC date of ``t`` (an ISO string is shown as its date part)."""
    if t is None:
        return None
    if isinstance(t, str):
        return t[:10]
    return t.astimezone(UTC).date().isoformat()


def snippet(text: str, chars: int = SNIPPET_CHARS) -> str:
    """One line of ``text``, cut at ``chars`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= chars else line[: chars - 1].rstrip() + "…"


def projects_line(counts: Sequence[tuple[str, int]]) -> str:
    """The projects there are, with their memory counts, for a message that sends a person to one."""
    if not counts:
        return "There are no memories yet, in any project (store one with `memlane remember`)."
    listed = ", ".join(f"{name} ({n})" for name, n in counts)
    return f"Projects with memories: {listed}."


def memory_card(m: Memory) -> list[str]:
    """A memory as a few lines: its content, then its id, project and the fields that are set."""
    facts = [f"id {m.id}", f"project {m.project}"]
    if m.category:
        facts.append(f"category {m.category}")
    if m.tags:
        facts.append("tags " + ", ".join(m.tags))
    if m.fact_type:
        facts.append(f"type {m.fact_type}")
    facts.append(f"priority {m.priority}")
    if m.pinned:
        facts.append("pinned")
    dates = []
    if m.occurred_at is not None:
        dates.append(f"happened {day(m.occurred_at)}")
    dates.append(f"stored {day(m.created_at)}")
    if m.updated_at != m.created_at:
        dates.append(f"updated {day(m.updated_at)}")
    if m.expires_at is not None:
        dates.append(f"expires {day(m.expires_at)}")
    lines = [m.content, "  " + "  ".join(facts), "  " + "  ".join(dates)]
    if m.superseded_by is not None:
        lines.append("  " + replaced_line(m, None))
    return lines


def indented(lines: Iterable[str]) -> str:
    """``lines`` as one block, each indented under the sentence that introduces it."""
    return "\n".join("  " + line for line in lines)


def replaced_line(m: Memory, by: Memory | None) -> str:
    """The mark of a replaced memory: by what, since when, and how to undo it."""
    what = handle_of(m.superseded_by)
    if by is not None:
        what += f' ("{snippet(by.content, 60)}")'
    when = f" on {day(m.valid_until)}" if m.valid_until is not None else ""
    return f"replaced by {what}{when} — `memlane unsupersede {handle_of(m.id)}` to undo"


def history_lines(h: dict[str, Any]) -> list[str]:
    """``Engine.history``'s answer for a person: the memory, whether it is current, the contents its
    updates replaced, the memories it replaced, and what replaced it."""
    m: Memory = h["memory"]
    later: Memory | None = h["superseded_by"]
    status = "current" if m.superseded_by is None else "replaced"
    lines = [f"Memory {handle_of(m.id)}: {status}", ""]
    lines += ["  " + line for line in memory_card(m)]
    if later is not None:
        lines += ["", f"Current version of this fact: {later.id}", f"  {later.content}"]
    versions = h["versions"]
    if versions:
        lines += ["", f"Earlier contents, replaced by updates ({len(versions)}, oldest first):"]
        for v in versions:
            said = f", said {day(v['occurred_at'])}" if v.get("occurred_at") else ""
            lines.append(f"  v{v['version']}  until {day(v['replaced_at'])}{said}")
            lines.append(f"      {v['content']}")
    earlier = h["supersedes"]
    if earlier:
        lines += ["", f"Memories it replaced ({len(earlier)}, newest first):"]
        for mid, content, since, until in earlier:
            span = f"from {day(since)}" + (f" until {day(until)}" if until is not None else "")
            lines.append(f"  {mid}  {span}")
            lines.append(f"      {content}")
            lines.append(f"      `memlane unsupersede {handle_of(mid)}` makes it current again")
    if not versions and not earlier and later is None:
        lines += ["", "No earlier versions: it was never updated, and it replaced no other memory."]
    return lines


# -- doctor -----------------------------------------------------------------------------------------

OK, WARNING, FAIL = "ok", "warning", "fail"


def doctor_checks(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(check, ok | warning | fail, detail) from doctor's JSON report, one per line it prints."""
    checks: list[tuple[str, str, str]] = []
    where = f"embedded, data in {report['data_dir']}" if report.get("data_dir") else report["database"]
    if "database_problem" in report:
        checks.append(("database", FAIL, f"{where}: {report['database_problem']}"))
    else:
        checks.append(
            (
                "database",
                OK,
                f"{where}; PostgreSQL {report.get('postgres')}, pgvector {report.get('pgvector')}, "
                f"schema {report.get('schema_version')}, {_memories(report.get('memories'))}",
            )
        )
        recorded = report.get("recorded_model")
        model = f"configured {report['configured_model']}, store {recorded or 'empty (none recorded)'}"
        if "model_problem" in report:
            missing = report.get("missing_embeddings")
            extra = f" ({missing} without a vector)" if missing else ""
            checks.append(("model", FAIL, f"{model}{extra}: {report['model_problem']}"))
        else:
            checks.append(("model", OK, model))
    for r in report.get("read_replicas") or ():
        if r.get("up"):
            lag = f", {r['lag_bytes']} bytes behind" if r.get("lag_bytes") is not None else ""
            checks.append(("read replica", OK, f"{r['replica']}{lag}"))
        else:
            checks.append(("read replica", WARNING, f"{r['replica']} is down: recall reads the primary"))
    emb = report.get("embedding") or {}
    check = str(report.get("embedding_check", ""))
    detail = f"{emb.get('provider')} {emb.get('model')}: {emb.get('why')}"
    if check.startswith("ok"):
        checks.append(("embedding", OK, f"{detail}; {check[3:].strip('()') or 'runs'}"))
    else:
        checks.append(("embedding", FAIL, f"{detail}; {check}"))
    if emb.get("fallback"):
        checks.append(("embedding fallback", WARNING, str(emb["fallback"])))
    if "prompts_problem" in report:
        checks.append(("prompts", FAIL, report["prompts_problem"]))
    else:
        checks.append(("prompts", OK, f"{len(report.get('prompts') or ())} versions, none edited"))
    llm = report.get("llm") or {}
    if llm.get("provider") == "none":
        checks.append(("LLM", OK, f"none configured: {llm.get('stages')}"))
    else:
        line = f"provider {llm.get('provider')}"
        if llm.get("sampling"):
            line += f"; sampling {llm['sampling']}"
        checks.append(("LLM", OK, line))
    backup = report.get("last_backup")
    if isinstance(backup, dict):
        checks.append(("last backup", OK, f"{backup['path']}, {backup['age']} ago ({backup['count']} kept)"))
    else:
        checks.append(("last backup", WARNING, f"{backup} (`memlane backup` makes one)"))
    versions = report.get("versions") or {}
    shown = ", ".join(f"{k} {v}" for k, v in versions.items() if v is not None)
    checks.append(("versions", OK, shown))
    return checks


def doctor_lines(report: dict[str, Any]) -> Iterable[str]:
    checks = doctor_checks(report)
    width = max(len(name) for name, _, _ in checks)
    for name, status, detail in checks:
        yield f"{status:<7} {name:<{width}}  {detail}"
    failed = sum(1 for _, s, _ in checks if s == FAIL)
    warned = sum(1 for _, s, _ in checks if s == WARNING)
    warnings = f"{warned} warning" + ("" if warned == 1 else "s")
    if report.get("status") == "ok":
        yield "\nAll checks passed" + (f" ({warnings})." if warned else ".")
    else:
        yield f"\nProblems found: {failed} failed, {warnings}. `memlane doctor --json` for details."


def _memories(n: Any) -> str:
    return "1 memory" if n == 1 else f"{n} memories"
