"""Markdown tables and PNG charts from the benchmark reports (the JSON is the source of truth;
these only render it, so a stored JSON can be re-rendered later).

``memlane bench report FILE`` prints a committed report (``bench/results/*.json``) as Markdown, and
the documentation's results tables are the cog blocks in README.md and docs/*.md that call
``from_file``, so ``make docs`` fails when a table no longer matches its JSON."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

K_LABELS = ("1", "5", "10", "20")


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return out


def _context_line(report: dict[str, Any]) -> str:
    cfg, ver = report["config"], report["versions"]
    parts = [f"Mode {cfg['mode']}", f"embedding {cfg['embedding_model']}"]
    if ver.get("postgresql"):
        parts.append(f"PostgreSQL {ver['postgresql']} + pgvector {ver.get('pgvector_extension')}")
    parts.append(f"memlane {ver.get('memlane')} ({ver.get('git')})")
    parts.append(f"{ver.get('cpus')} CPUs")
    return ", ".join(parts) + "."


# -- LoCoMo ------------------------------------------------------------------------------------


def _method_row(name: str, block: dict, latency: dict | None) -> list[Any]:
    lat = latency or {}
    return [
        name,
        *(block["all"][k] for k in K_LABELS),
        block["cat1_4"]["5"],
        block["cat1_4"]["10"],
        lat.get("p50"),
        lat.get("p95"),
    ]


def _methods(r: dict[str, Any]) -> list[tuple[str, dict, dict | None]]:
    """(label, recall block, latency) per method; the default run is listed once, under the
    ablation method that shares it when there is one."""
    described = r.get("ablation_methods", {})
    shared = [n for n, d in described.items() if d.get("shares_default_run")]
    out = [] if shared else [("default", r["recall"], r["latency_ms"])]
    for name, block in r.get("ablation", {}).items():
        label = f"{name} (default)" if name in shared else name
        out.append((label, block, r.get("ablation_latency_ms", {}).get(name)))
    return out


def locomo_markdown(r: dict[str, Any]) -> str:
    lines = [
        f"## LoCoMo retrieval: {r['conversations']} conversations, {r['questions']} questions",
        "",
        _context_line(r),
        "",
    ]
    if "path" in r:  # (reports before the paths were all batch)
        shape = f"; shape {r['shape']}" if r.get("shape", "turns") != "turns" else ""
        lines += [f"Path: **{r['path']}** ({r['config'].get('path', '')}){shape}.", ""]
    header = ["method", "R@1", "R@5", "R@10", "R@20", "R@5 cat1-4", "R@10 cat1-4", "p50 ms", "p95 ms"]
    rows = [_method_row(name, block, lat) for name, block, lat in _methods(r)]
    lines += _table(header, rows)
    if r.get("adjust_variants"):
        lines += ["", "### Scoring adjustments (stage 8) re-applied to the same candidates", ""]
        vrows = [_method_row(name, block, None)[:7] for name, block in r["adjust_variants"].items()]
        lines += _table(header[:7], vrows)
        lines += ["", r.get("adjust_variants_note", "")]
    lines += ["", "### By category (default)", ""]
    counts = r.get("questions_by_category", {})
    cat_rows = [[c, counts.get(c), *(b[k] for k in K_LABELS)] for c, b in r["recall"]["by_category"].items()]
    cat_rows.append(
        [
            "1-4",
            sum(n for c, n in counts.items() if c in "1234"),
            *(r["recall"]["cat1_4"][k] for k in K_LABELS),
        ]
    )
    cat_rows.append(["all", r["questions"], *(r["recall"]["all"][k] for k in K_LABELS)])
    lines += _table(["category", "questions", "R@1", "R@5", "R@10", "R@20"], cat_rows)
    lines += ["", "### Recall latency per stage (default, ms)", ""]
    stage_rows = [[s, v["p50"], v["p95"]] for s, v in r["latency_ms"]["stages"].items()]
    stage_rows.append(["**total (wall)**", r["latency_ms"]["p50"], r["latency_ms"]["p95"]])
    lines += _table(["stage", "p50", "p95"], stage_rows)
    tok, unrel = r.get("tokens_delivered"), r.get("unrelated")
    if tok:
        lines += [
            "",
            f"Tokens delivered per recall (the result as the client's model reads it, cl100k): mean "
            f"{tok['mean']}, p50 {tok['p50']}, p95 {tok['p95']}; max_tokens {tok['max_tokens']}, limit {tok['limit']}.",
        ]
    if unrel:
        lines += [
            f"Unrelated questions: {unrel['questions']} questions x {unrel['projects']} projects, mean "
            f"{unrel['mean_memories']} memories returned (limit {unrel['limit']}), "
            f"{unrel['share_with_memories']} of recalls return any, at most {unrel['max_memories']}.",
        ]
    floor = r.get("threshold")
    if floor:
        lines += [
            f"Stage 7 (relevance threshold): of {floor['evidence_in_top20_before']} evidence turns among "
            f"the first 20 candidates it was given, {floor['evidence_lost']} dropped "
            f"({floor['questions_losing_evidence']} questions).",
        ]
    access = r.get("access")
    if access:
        lines += ["", "### Access counting (tool path)", ""]
        arows = [
            [name, *(access[key]["all"][k] for k in K_LABELS)]
            for name, key in (
                ("accesses not counted", "not_counted"),
                ("counted, as the tool does (headline)", "counted"),
                ("the same questions again", "asked_again"),
            )
        ]
        lines += _table(["run", "R@1", "R@5", "R@10", "R@20"], arows)
        lines += [
            "",
            f"Result lists changed by counting: {access['lists_changed_by_counting']} of "
            f"{access['questions']}; when asked again: {access['lists_changed_when_asked_again']}.",
        ]
    rem = r["remember"]
    ev = r["evidence"]
    if "memories" in rem:
        how = (
            "one remember call per turn"
            if r.get("path") == "tool"
            else (f"batches of {r['config'].get('remember_batch')}")
        )
        stored = (
            f"Remember: {rem['turns']} turns -> {rem['memories']} memories in {rem['seconds']} s "
            f"({rem['per_second']} turns/s, {how})."
        )
    else:  # the ingest path
        stored = f"Ingest: {rem['turns']} turns -> {rem['stored']} stored pieces in {rem['seconds']} s."
    lines += [
        "",
        stored,
        f"Evidence repairs: {ev['split']} split, {ev['normalised']} normalised, {ev['dropped_malformed']} "
        f"malformed tokens dropped, {ev['unknown_kept']} unknown ids kept in the denominator, "
        f"{ev['questions_skipped']} questions skipped.",
        "",
    ]
    ing = r.get("ingest")
    if ing and "explicit_remember_recall" in ing:
        lines += [
            "### Ingest variant (each session through `ingest`)",
            "",
            f"{ing['turns']} turns -> {ing['pieces']} pieces: {ing['stored']} stored, {ing['duplicate']} "
            f"duplicate, {ing['filtered']} filtered ({ing['turns_per_second']} turns/s). Evidence turns lost "
            f"to the filter: {ing['evidence_turns_lost']} of {ing['evidence_turns']} ({ing['evidence_lost_share']}); "
            f"{ing['evidence_turns_deduplicated']} deduplicated into a similar memory.",
            "",
        ]
        rows = [
            ["explicit remember", *(ing["explicit_remember_recall"]["all"][k] for k in K_LABELS)],
            ["ingest", *(ing["recall"]["all"][k] for k in K_LABELS)],
        ]
        lines += _table(["run", "R@1", "R@5", "R@10", "R@20"], rows)
        reasons = ", ".join(f"{k}: {n}" for k, n in ing["filtered_by"].items())
        lines += ["", f"Filtered because: {reasons or 'nothing filtered'}.", ""]
    return "\n".join(lines)


def locomo_plot(r: dict[str, Any], out: str | Path) -> None:
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    ks = [int(k) for k in K_LABELS]
    for name, block, _ in _methods(r):
        ax1.plot(ks, [block["all"][k] for k in K_LABELS], marker="o", label=name)
    ax1.set(
        xlabel="k",
        ylabel="recall@k (all questions)",
        xticks=ks,
        ylim=(0, 1),
        title=f"LoCoMo recall@k ({r['questions']} questions)",
    )
    ax1.grid(alpha=0.3)
    ax1.legend()
    _stage_bars(ax2, r["latency_ms"]["stages"], "recall latency per stage (default)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _stage_bars(ax, stages: dict[str, dict[str, float]], title: str) -> None:
    names = list(stages)
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [stages[n]["p50"] for n in names], height=0.4, label="p50")
    ax.barh([i - 0.2 for i in y], [stages[n]["p95"] for n in names], height=0.4, label="p95")
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set(xlabel="ms", title=title)
    ax.legend()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# -- latency -----------------------------------------------------------------------------------


def latency_markdown(r: dict[str, Any]) -> str:
    lines = [
        f"## Latency and throughput: synthetic corpus ({r['corpus']['projects']} projects, seed {r['corpus']['seed']})",
        "",
        _context_line(r),
        "",
    ]
    header = [
        "memories",
        "remember/s",
        "raw embed/s",
        "ratio",
        "recall p50",
        "recall p95",
        "floor p50",
        "recall/floor",
        "PSS MB",
        "database MB",
    ]
    rows = [
        [
            s["memories"],
            s.get("remember", {}).get("per_second"),  # (none on a kept store measured as it was)
            s.get("embedding", {}).get("per_second"),
            s["remember_vs_embedding"],
            s["recall"]["p50"],
            s["recall"]["p95"],
            s["floor"]["p50"],
            s["recall_vs_floor"],
            (s.get("memory") or {}).get("pss_mb"),
            s.get("database_mb"),
        ]
        for s in r["sizes"]
    ]
    lines += _table(header, rows)
    built = [s for s in r["sizes"] if "pool_build" in s]
    if built:
        lines += ["", "### Pool path (pool-derived vectors, the same write path)", ""]
        lines += _table(
            ["memories", "written", "seconds", "memories/s", "batches in flight"],
            [
                [s["memories"], b["memories"], b["seconds"], b["per_second"], b["concurrency"]]
                for s in built
                for b in [s["pool_build"]]
            ],
        )
    if r["config"].get("build"):
        lines += ["", f"Build: {r['config']['build']}"]
    lines += ["", "### Recall p50 per stage (ms)", ""]
    sizes = [str(s["memories"]) for s in r["sizes"]]
    stages = list(r["sizes"][0]["recall"]["stages"]) if r["sizes"] else []
    stage_rows = [[st, *(s["recall"]["stages"][st]["p50"] for s in r["sizes"])] for st in stages]
    stage_rows.append(["floor: query embedding", *(s["floor"]["embed"]["p50"] for s in r["sizes"])])
    stage_rows.append(["floor: bare pgvector top-k", *(s["floor"]["query"]["p50"] for s in r["sizes"])])
    lines += _table(["stage", *sizes], stage_rows)
    measured = [s for s in r["sizes"] if s.get("cpu")]  # (reports from before it was measured)
    if measured:
        cores = measured[0]["cpu"]["cores"]
        lines += [
            "",
            f"### CPU per call (ms, mean; {cores} cores; database: its processes on this machine)",
            "",
        ]
        lines += _table(
            ["memories", "recall engine", "recall database", "recall total", "floor total", "recall/floor"],
            [
                [
                    s["memories"],
                    c["recall"]["engine_ms"],
                    c["recall"]["database_ms"],
                    c["recall"]["total_ms"],
                    c["floor"]["total_ms"],
                    round(c["recall"]["total_ms"] / c["floor"]["total_ms"], 3)
                    if c["recall"]["total_ms"] and c["floor"]["total_ms"]
                    else None,
                ]
                for s in measured
                for c in [s["cpu"]]
            ],
        )
    judged = [s for s in r["sizes"] if s.get("quality", {}).get("questions")]  # (older reports have none)
    if judged:
        lines += [
            "",
            "### What recall returned (share of relevant memories among the first k, by the corpus's templates)",
            "",
        ]
        at = [key for key in judged[0]["quality"] if key.startswith("p@")]  # as the run measured them
        lines += _table(
            ["memories", "questions", *at],
            [[s["memories"], s["quality"]["questions"], *(s["quality"][key] for key in at)] for s in judged],
        )
    paired = r.get("growth_taking_turns")
    if paired:
        lines += ["", "### Growth, taking turns with a copy of the store at the reference size", ""]
        if paired["status"] == "measured":
            lines += _table(
                ["memories", "copy at", "recall p50", "copy's recall p50", "growth", "recalls each"],
                [
                    [
                        paired["memories"],
                        paired["reference"],
                        paired["recall_p50"],
                        paired["reference_p50"],
                        paired["growth"],
                        paired["recalls_each"],
                    ]
                ],
            )
        else:
            lines.append(paired["status"])
    lines += ["", "### Targets", ""]
    lines += _table(
        ["target", "measured", "limit", "result"],
        [[t["name"], t["value"], t["limit"], t["result"]] for t in current_targets(r)],
    )
    return "\n".join(lines + [""])


def current_targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """A latency result's targets as ``TARGETS`` in bench/latency.py sets them now, not as they were
    when it ran (its JSON keeps those): the measured figures are the run's, the bar is today's."""
    from memlane.bench.latency import REFERENCE, evaluate_targets

    paired = r.get("growth_taking_turns")
    reference = (paired or {}).get("reference", REFERENCE)
    return evaluate_targets(r["sizes"], paired, reference)


def latency_plot(r: dict[str, Any], out: str | Path) -> None:
    plt = _pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    sizes = [s["memories"] for s in r["sizes"]]
    labels = [f"{n:,}" for n in sizes]
    stages = list(r["sizes"][0]["recall"]["stages"]) if r["sizes"] else []
    bottom = [0.0] * len(sizes)
    for st in stages:
        vals = [s["recall"]["stages"][st]["p50"] for s in r["sizes"]]
        if max(vals, default=0) < 0.05:
            continue
        ax1.bar(labels, vals, bottom=bottom, label=st)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax1.plot(labels, [s["floor"]["p50"] for s in r["sizes"]], "k--o", label="floor p50")
    ax1.set(xlabel="memories", ylabel="ms (p50)", title="recall p50 per stage vs floor")
    ax1.legend(fontsize=8)
    x = range(len(sizes))
    ax2.bar(
        [i - 0.2 for i in x],
        [s.get("remember", {}).get("per_second") or 0 for s in r["sizes"]],
        width=0.4,
        label="remember",
    )
    ax2.bar(
        [i + 0.2 for i in x],
        [s.get("embedding", {}).get("per_second") or 0 for s in r["sizes"]],
        width=0.4,
        label="raw embedding",
    )
    ax2.set_xticks(list(x), labels)
    ax2.set(xlabel="memories", ylabel="memories/s", title="write throughput")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


# -- MCP ---------------------------------------------------------------------------------------


def mcp_markdown(r: dict[str, Any]) -> str:
    lines = [f"## MCP over stdio: {r['runs']} spawns of `memlane serve`", "", _context_line(r), ""]
    rows = []
    for label, key in (
        ("spawn -> initialized", "initialize_ms"),
        ("spawn -> tools/list done", "tools_list_ms"),
        ("stdin closed -> process gone", "shutdown_ms"),
    ):
        v = r["cold_start"][key]
        rows.append([label, v["median"], v["min"], v["max"], len(v["all"])])
    lines += _table(["cold start (ms)", "median", "min", "max", "n"], rows) + [""]
    label = "spawn -> first recall answered (model loaded)"
    first = r.get("first_recall_ms")  # every spawn's; older reports have only the last one's
    if first:
        rows = [[label, first["median"], first["min"], first["max"], len(first["all"])]]
    else:
        rows = [[label, r["ready_ms"], "-", "-", 1]]
    cold = r.get("cold_database")
    if cold:
        v = cold["first_recall_ms"]
        rows.append(
            ["... with PostgreSQL stopped before the spawn", v["median"], v["min"], v["max"], len(v["all"])]
        )
    for label, key in (("remember", "remember_ms"), ("recall", "recall_ms")):
        v = r[key]
        rows.append([f"{label} over MCP", v["median"], v["p50"], v["p95"], v["n"]])
    lines += _table(["warm call (ms)", "median", "p50", "p95", "n"], rows)
    populated = r.get("config", {}).get("populated")
    if populated:
        lines += ["", f"First recalls search a store of {populated:,} memories."]
    if r.get("stores_per_s") is not None:
        lines += [
            "",
            f"One `remember` call at a time over stdio: **{r['stores_per_s']} stores/s** "
            f"({r['remember_ms']['n']} calls, each waiting for the last; "
            f"{r.get('config', {}).get('remembered', 'the latency corpus')}).",
        ]
    return "\n".join(lines + [""])


# -- committed reports -------------------------------------------------------------------------

# The module that renders each benchmark's report; LoCoMo's report names its dataset instead.
RENDERERS = {
    "locomo": ("memlane.bench.report", "locomo_markdown"),
    "latency": ("memlane.bench.report", "latency_markdown"),
    "mcp": ("memlane.bench.report", "mcp_markdown"),
    "footprint": ("memlane.bench.footprint", "markdown"),
    "llm": ("memlane.bench.llmbench", "markdown"),
    "load": ("memlane.bench.loadbench", "markdown"),
    "maintain": ("memlane.bench.maintainbench", "markdown"),
    "import": ("memlane.bench.importbench", "markdown"),
    "topics": ("memlane.bench.topicsbench", "markdown"),
    "labels": ("memlane.bench.labelsbench", "markdown"),
    "backup": ("memlane.bench.backupbench", "markdown"),
    "updates": ("memlane.bench.updates", "markdown"),
    "beam": ("memlane.bench.beam", "markdown"),
}
VIEWS = ("full", "summary")


def kind(r: dict[str, Any]) -> str:
    name = r.get("benchmark") or r.get("dataset")
    if name not in RENDERERS:
        raise ValueError(f"not a memlane benchmark report (benchmark/dataset {name!r})")
    return name


def render(r: dict[str, Any], view: str = "full") -> str:
    """A report as Markdown: every table (``full``), or the one table the README shows (``summary``,
    LoCoMo only)."""
    if view == "summary":
        if kind(r) != "locomo":
            raise ValueError("the summary view is LoCoMo's only")
        return locomo_summary_markdown(r)
    module, name = RENDERERS[kind(r)]
    return getattr(importlib.import_module(module), name)(r)


def load(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def from_file(path: str | Path, view: str = "full", demote: int = 0) -> str:
    """What a cog block writes: the report at ``path`` rendered; ``demote`` pushes its headings that
    many levels down, to sit under the page's own."""
    text = render(load(path), view)
    if demote:
        text = "\n".join("#" * demote + line if line.startswith("#") else line for line in text.split("\n"))
    return text


def locomo_paths_markdown(paths: list[str | Path]) -> str:
    """One row per stored LoCoMo report: how the turns were stored (path, shape), recall@k, stage 7's
    evidence losses and what unrelated questions got; for comparing the paths of one code."""
    rows = []
    for p in paths:
        r = load(p)
        rec, floor, unrel = r["recall"], r.get("threshold") or {}, r.get("unrelated") or {}
        label = r.get("path", "batch") + ("" if r.get("shape", "turns") == "turns" else f", {r['shape']}")
        lost = f"{floor.get('evidence_lost')} of {floor.get('evidence_in_top20_before')}" if floor else ""
        rows.append(
            [
                label,
                *(rec["all"][k] for k in K_LABELS),
                rec["cat1_4"]["5"],
                rec["cat1_4"]["10"],
                lost,
                unrel.get("mean_memories"),
            ]
        )
    header = ["stored through", "R@1", "R@5", "R@10", "R@20", "R@5 cat1-4", "R@10 cat1-4"]
    header += ["evidence lost at stage 7", "unrelated: memories per recall"]
    return "\n".join(_table(header, rows)) + "\n"


def locomo_summary_markdown(r: dict[str, Any]) -> str:
    """The README's table: recall@k of the run as configured, over every question, categories 1-4
    (5 is adversarial) and each category, and where it was measured."""
    counts = r.get("questions_by_category", {})
    rec = r["recall"]
    rows = [
        ["**all**", r["questions"], *(f"**{_fmt(rec['all'][k])}**" for k in K_LABELS)],
        [
            "categories 1-4",
            sum(n for c, n in counts.items() if c in "1234"),
            *(rec["cat1_4"][k] for k in K_LABELS),
        ],
    ]
    rows += [
        [f"category {c}", counts.get(c), *(b[k] for k in K_LABELS)] for c, b in rec["by_category"].items()
    ]
    ver = r.get("versions", {})
    lines = _table(["questions", "n", "R@1", "R@5", "R@10", "R@20"], rows)
    return "\n".join(
        [
            *lines,
            "",
            f"{r['conversations']} conversations, {r['config'].get('embedding_model')}, offline; memlane "
            f"{ver.get('memlane')} at `{ver.get('git')}`.",
            "",
        ]
    )
