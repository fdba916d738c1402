"""``memlane bench``: LoCoMo retrieval quality, latency/throughput, MCP start-up, LLM-stage overhead,
concurrent load over streamable HTTP, or all of them.

Each benchmark prints its Markdown tables on stdout, progress on stderr, and writes the JSON
report (the stable, documented layout), a Markdown file and a PNG chart when asked. Nothing here
is a pass/fail test: the latency targets are reported, never asserted.

``memlane`` hands what follows ``bench`` to ``parse`` (its parser is built only for this command), then
calls ``run``. Each benchmark's module is imported by the function that runs it: those modules load
the engine, which takes seconds to import.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memlane.server import aio

DEFAULT_SIZES = "1000,10000,100000"
# bench latency's build defaults, here because its module loads only when it runs (latency.POOL and
# latency.BUILD_CONCURRENCY are the same numbers; a test checks).
DEFAULT_POOL = 10_000
DEFAULT_CONCURRENCY = 2
ALL_SIZES = "1000,10000"
UPDATES_OUT = "bench/results/updates.json"


def _sizes(text: str) -> list[int]:
    try:
        sizes = sorted({int(s.replace("_", "")) for s in text.split(",") if s.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--memories wants sizes like 1000,10000; got {text!r}") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("--memories wants positive sizes, e.g. 1000,10000")
    return sizes


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"wants a positive integer; got {text!r}")
    return n


def _store_args(p: argparse.ArgumentParser) -> None:
    """Also accepted after the subcommand; SUPPRESS keeps the top-level value when not given here."""
    p.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help="TOML settings file")
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="use this data directory instead of a temporary database (the run's projects are deleted)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _common(p: argparse.ArgumentParser, plot: bool = True) -> None:
    p.add_argument("--json", metavar="OUT", help="write the JSON report here")
    p.add_argument("--markdown", metavar="OUT", help="write the Markdown tables here")
    if plot:
        p.add_argument("--plot", metavar="OUT.png", help="write a PNG chart here")
    _store_args(p)


HELP = "benchmarks: LoCoMo retrieval, latency, MCP start-up, LLM stages (see README)"


def parse(argv: list[str], into: argparse.Namespace) -> argparse.Namespace:
    """``memlane bench``'s arguments (what follows ``bench``) into the command line's namespace."""
    p = argparse.ArgumentParser(prog="memlane bench", description=HELP)
    _benchmarks(p)
    return p.parse_args(argv, namespace=into)


def add_parser(sub: Any) -> None:
    """``memlane bench`` as a subcommand of ``sub`` (the command-line reference draws it so)."""
    _benchmarks(sub.add_parser("bench", help=HELP))


def _benchmarks(b: argparse.ArgumentParser) -> None:
    bs = b.add_subparsers(dest="bench", required=True, metavar="BENCHMARK")

    p = bs.add_parser("locomo", help="retrieval recall@k on LoCoMo (the protocol: docs/benchmarks.md)")
    p.set_defaults(bench_run=_locomo)
    p.add_argument("data", metavar="DATA", help="directory of conversation files, one file, or locomo10.json")
    p.add_argument(
        "--path",
        choices=["tool", "batch", "ingest"],
        default="tool",
        help="how the turns are stored: tool (default) one remember tool call per turn, as a client "
        "does; batch: remember_many with a source per session; ingest: each session through ingest",
    )
    p.add_argument(
        "--shape",
        choices=["turns", "long-replies"],
        default="turns",
        help="turns (default): one memory per turn; long-replies: short turns alternating with pieces of "
        "200-600 words (a chat with long assistant replies)",
    )
    p.add_argument("--ablate", action="store_true", help="also run each arm alone and in combinations")
    p.add_argument(
        "--ingest",
        action="store_true",
        help="also feed each session through ingest and report what it kept and R@k on that",
    )
    p.add_argument(
        "--adjust-variants",
        action="store_true",
        help="also score each scoring-adjustment variant (decay shares, half-lives, each factor) on the "
        "same candidates",
    )
    p.add_argument(
        "--stored-with",
        metavar="PROVIDER",
        help="embed the memories with this embedding provider and the questions with the configured one "
        "(e.g. local: a store torch embedded, read by the onnx default)",
    )
    _common(p)

    p = bs.add_parser("latency", help="remember throughput and recall latency on a synthetic corpus")
    p.set_defaults(bench_run=_latency)
    p.add_argument("--memories", type=_sizes, default=_sizes(DEFAULT_SIZES), help=f"default {DEFAULT_SIZES}")
    p.add_argument("--queries", type=int, default=100, help="recall queries per size (default 100)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--pool",
        type=_positive,
        default=DEFAULT_POOL,
        help=f"memories embedded by the model before the rest get pool-derived vectors (default {DEFAULT_POOL})",
    )
    p.add_argument(
        "--concurrency",
        type=_positive,
        default=DEFAULT_CONCURRENCY,
        help=f"pool-path remember_many batches in flight (default {DEFAULT_CONCURRENCY})",
    )
    p.add_argument(
        "--keep",
        action="store_true",
        help="with --data-dir: keep the store (projects without a run id) and reuse it next time",
    )
    _common(p)

    p = bs.add_parser("mcp", help="cold start of `memlane serve` and tool-call latency over stdio")
    p.set_defaults(bench_run=_mcp)
    p.add_argument("--runs", type=int, default=5, help="spawns to time (default 5)")
    p.add_argument(
        "--calls",
        type=int,
        default=100,
        help="remember (one call each) and recall calls to time (default 100)",
    )
    p.add_argument(
        "--populate",
        type=int,
        default=1000,
        help="memories stored before the spawns, for their first recall (default 1000)",
    )
    p.add_argument(
        "--cold-database",
        action="store_true",
        help="also spawn with the embedded PostgreSQL stopped each time (the server starts it)",
    )
    p.add_argument(
        "--conversation",
        metavar="FILE",
        help="remember this LoCoMo conversation's turns (one call each, into a new project) instead of the corpus",
    )
    _common(p, plot=False)

    p = bs.add_parser(
        "footprint", help="resident memory of the server and its database; --install: install size"
    )
    p.set_defaults(bench_run=_footprint)
    p.add_argument(
        "--conversation", metavar="FILE", help="a LoCoMo conversation file to remember (default: synthetic)"
    )
    p.add_argument(
        "--install", action="store_true", help="also pip install the project into a new venv and measure it"
    )
    _common(p, plot=False)

    p = bs.add_parser("llm", help="what the LLM stages add to a recall, against a local stand-in API")
    p.set_defaults(bench_run=_llm)
    p.add_argument("--delay-ms", type=float, default=200.0, help="the stand-in's answer delay (default 200)")
    p.add_argument("--memories", type=int, default=1000, help="store size (default 1000)")
    p.add_argument("--queries", type=int, default=40, help="recalls per path (default 40)")
    p.add_argument("--seed", type=int, default=7)
    _common(p, plot=False)

    p = bs.add_parser(
        "load", help="concurrent MCP clients over streamable HTTP: throughput, latency, nothing lost"
    )
    p.set_defaults(bench_run=_load)
    p.add_argument("--clients", type=_positive, default=16, help="concurrent MCP sessions (default 16)")
    p.add_argument("--seconds", type=float, default=30.0, help="length of the concurrent phase (default 30)")
    p.add_argument(
        "--servers",
        type=_positive,
        default=1,
        help="memlane serve processes on one database, each request to the next (default 1)",
    )
    p.add_argument(
        "--database-url",
        metavar="URL",
        help="the servers' database.url (an external PostgreSQL); 'standalone': start a PostgreSQL 18 "
        "server for the run (initdb, pg_ctl) and remove it afterwards. Default: the configured store, "
        "else a temporary embedded one",
    )
    p.add_argument(
        "--write-share", type=float, default=0.5, help="share of calls that are remembers (default 0.5)"
    )
    _common(p, plot=False)

    p = bs.add_parser(
        "backup", help="memlane backup and restore of a store of N memories (random vectors, by COPY)"
    )
    p.set_defaults(bench_run=_backup)
    p.add_argument("--memories", type=_positive, default=100_000, help="store size (default 100000)")
    p.add_argument("--runs", type=_positive, default=3, help="backups and restores to time (default 3)")
    p.add_argument("--projects", type=_positive, default=10, help="projects, each indexed (default 10)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", metavar="OUT", help="write the JSON report here")
    p.add_argument("--markdown", metavar="OUT", help="write the Markdown tables here")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    p = bs.add_parser(
        "replica",
        help="read-your-writes through a streaming hot standby (its own temporary primary and standby)",
    )
    p.set_defaults(bench_run=_replica)
    p.add_argument(
        "--pairs", type=_positive, default=100, help="remember->recall pairs, standby up (default 100)"
    )
    p.add_argument(
        "--stopped-pairs", type=_positive, default=30, help="pairs once the standby is stopped (default 30)"
    )
    p.add_argument("--wait-ms", type=float, default=200.0, help="database.replica_wait_ms (default 200)")
    p.add_argument("--json", metavar="OUT", help="write the JSON report here")
    p.add_argument("--markdown", metavar="OUT", help="write the Markdown table here")

    p = bs.add_parser("import", help="memlane import --from chatgpt on a generated ChatGPT export, twice")
    p.set_defaults(bench_run=_import)
    p.add_argument("--messages", type=_positive, default=10000, help="messages in the export (default 10000)")
    p.add_argument("--seed", type=int, default=7)
    _common(p, plot=False)

    p = bs.add_parser("maintain", help="memlane maintain (purge, merge, vacuum) on a synthetic store")
    p.set_defaults(bench_run=_maintain)
    p.add_argument("--memories", type=int, default=10000, help="store size before planting (default 10000)")
    p.add_argument(
        "--every",
        type=int,
        default=50,
        help="plant a near-duplicate and an expired memory every N (default 50)",
    )
    p.add_argument("--seed", type=int, default=7)
    _common(p, plot=False)

    p = bs.add_parser(
        "topics", help="accuracy of topics and fact types on labelled memories (offline, or with --llm)"
    )
    p.set_defaults(bench_run=_topics)
    p.add_argument("files", metavar="FILE", nargs="+", help='JSON lines {"text", "topic", "fact_type"}')
    p.add_argument(
        "--taxonomy", metavar="TOML", required=True, help="the fixed topics: [[custom_topics]] tables"
    )
    p.add_argument(
        "--llm", action="store_true", help="also the topics LLM stage on the configured [llm] provider"
    )
    _common(p, plot=False)

    p = bs.add_parser(
        "labels",
        help="automatic category names against the labels a person would write "
        "(bench/data/category_labels.json)",
        description="Names each hand-labelled cluster's memories as automatic topics are named (before: "
        "key-term pairs; now: noun phrases) and through the write path's topic assignment, and reports "
        "the share that match an accepted label or its head noun. The protocol: docs/benchmarks.md.",
    )
    p.set_defaults(bench_run=_labels)
    p.add_argument(
        "--data", metavar="FILE", help="a labelled file of the same layout (default: the bundled one)"
    )
    _common(p, plot=False)

    p = bs.add_parser(
        "beam",
        help="retrieval recall@k per ability on long coding-assistant chats (BEAM; ../shared/beam)",
        description="Stores every turn of each conversation through the remember tool's code (one "
        "project per conversation), asks its questions with the recall tool's arguments (limit 20), "
        "and reports R@1/5/10/20 per ability, knowledge updates answered current first and "
        "contradictions with both sides. The protocol: docs/benchmarks.md.",
    )
    p.set_defaults(bench_run=_beam)
    p.add_argument("data", metavar="DATA", help="a folder of conversations: N/chat.json and N/questions.json")
    p.add_argument(
        "--json",
        metavar="OUT",
        help="write the JSON report here (the committed one: bench/results/beam.json)",
    )
    p.add_argument("--markdown", metavar="OUT", help="write the Markdown tables here")
    _store_args(p)

    p = bs.add_parser(
        "updates",
        help="facts that change: is the current value recalled first, the old one still found, and "
        "what gets superseded (bench/data/updates.json)",
        description='Stores hand-written update chains ("Maya lives in Lisbon" ... "Maya moved to '
        "Berlin\") through an in-process MCP client's remember tool, asks their questions through "
        "recall (limit 10), and reports current hit@1, stale-above-current rate, history hit@3, "
        "look-alike hit@1, and the supersessions remember reported against those the data expects "
        "(false and missed). The protocol: docs/benchmarks.md.",
    )
    p.set_defaults(bench_run=_updates)
    p.add_argument(
        "--data", metavar="FILE", help="an update-chain file of the same layout (default: the bundled one)"
    )
    p.add_argument(
        "--out",
        "--json",
        dest="json",
        metavar="OUT",
        default=UPDATES_OUT,
        help=f"write the JSON report here (default {UPDATES_OUT})",
    )
    p.add_argument("--markdown", metavar="OUT", help="write the Markdown tables here")
    p.add_argument(
        "--locomo-supersessions",
        action="store_true",
        help="also store the LoCoMo development conversations through remember and report the "
        "supersessions it made there, with a sample of pairs to judge (slow: one call per turn)",
    )
    p.add_argument(
        "--locomo",
        metavar="PATH",
        help="LoCoMo data for --locomo-supersessions (implies it); default: ../shared/locomo when it exists",
    )
    _store_args(p)

    p = bs.add_parser("report", help="render committed benchmark JSON (bench/results/*.json) as Markdown")
    p.set_defaults(bench_run=_report)
    p.add_argument("files", metavar="FILE", nargs="+", help="a JSON report written by --json")
    p.add_argument(
        "--view", choices=("full", "summary"), default="full", help="summary: the README's LoCoMo table"
    )
    p.add_argument("--markdown", metavar="OUT", help="also write the Markdown here")

    p = bs.add_parser("all", help="locomo (if the data is there) and latency, results into a directory")
    p.set_defaults(bench_run=_all)
    p.add_argument("--output", metavar="DIR", default="bench/results")
    p.add_argument("--locomo", metavar="DATA", help="default: ../shared/locomo when it exists")
    p.add_argument("--memories", type=_sizes, default=_sizes(ALL_SIZES), help=f"default {ALL_SIZES}")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--seed", type=int, default=7)
    _store_args(p)


def _write_json(report: dict[str, Any], path: str) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def _write(report: dict[str, Any], markdown: str, args, plot_fn=None) -> None:
    print(markdown)
    if getattr(args, "json", None):
        _write_json(report, args.json)
    if getattr(args, "markdown", None):
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(markdown, encoding="utf-8")
    if plot_fn is not None and getattr(args, "plot", None):
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        plot_fn(report, args.plot)


def _locomo(args, settings) -> int:
    from memlane.bench import locomo, report

    data = Path(args.data)
    if not data.exists():
        print(f"memlane bench: {data} does not exist (see README: getting LoCoMo)", file=sys.stderr)
        return 2
    embedder = None
    if getattr(args, "stored_with", None):
        from memlane.bench.crossmodel import stored_with

        embedder = stored_with(args.stored_with, settings.engine().embedding)
    result = aio.run(
        locomo.run(
            settings,
            data,
            path=getattr(args, "path", "tool"),
            shape=getattr(args, "shape", "turns"),
            embedder=embedder,
            ablate=args.ablate,
            ingest_variant=getattr(args, "ingest", False),
            adjust_variants=getattr(args, "adjust_variants", False),
            show_progress=not args.quiet,
        )
    )
    _write(result, report.locomo_markdown(result), args, report.locomo_plot)
    return 0


def _beam(args, settings) -> int:
    from memlane.bench import beam

    data = Path(args.data)
    if not data.is_dir():
        print(f"memlane bench beam: {data} is not a folder of conversations (N/chat.json)", file=sys.stderr)
        return 2
    try:
        result = aio.run(beam.run(settings, data, show_progress=not args.quiet))
    except ValueError as e:  # a conversation file that cannot be read
        print(f"memlane bench beam: {e}", file=sys.stderr)
        return 2
    _write(result, beam.markdown(result), args)
    return 0


def _updates(args, settings) -> int:
    from memlane.bench import updates

    if args.data and not Path(args.data).is_file():
        print(f"memlane bench updates: no such file: {args.data}", file=sys.stderr)
        return 2
    locomo = None
    if args.locomo or args.locomo_supersessions:
        locomo = Path(args.locomo) if args.locomo else _default_locomo()
        if locomo is None or not locomo.exists():
            print(
                "memlane bench updates: no LoCoMo data (../shared/locomo or --locomo); "
                "skipping the LoCoMo supersessions",
                file=sys.stderr,
            )
            locomo = locomo or Path("locomo")  # the report says it was skipped
    try:
        result = aio.run(updates.run(settings, data=args.data, locomo=locomo, show_progress=not args.quiet))
    except ValueError as e:  # a data file that fails its checks
        print(f"memlane bench updates: {e}", file=sys.stderr)
        return 2
    _write(result, updates.markdown(result), args)
    return 0


def _latency(args, settings) -> int:
    from memlane.bench import latency, report

    result = aio.run(
        latency.run(
            settings,
            args.memories,
            queries=args.queries,
            seed=args.seed,
            show_progress=not args.quiet,
            pool=args.pool,
            concurrency=args.concurrency,
            keep=args.keep,
            partial=(lambda r: _write_json(r, args.json)) if getattr(args, "json", None) else None,
        )
    )
    _write(result, report.latency_markdown(result), args, report.latency_plot)
    return 0


def _mcp(args, settings) -> int:
    from memlane.bench import mcpbench, report

    result = aio.run(
        mcpbench.run(
            settings,
            runs=args.runs,
            calls=args.calls,
            populate=args.populate,
            cold_database=args.cold_database,
            conversation=args.conversation,
            config_path=getattr(args, "config", None),
        )
    )
    _write(result, report.mcp_markdown(result), args)
    return 0


def _footprint(args, settings) -> int:
    from memlane.bench import footprint

    result = aio.run(footprint.run(args.conversation, install=args.install))
    _write(result, footprint.markdown(result), args)
    return 0


def _llm(args, settings) -> int:
    from memlane.bench import llmbench

    result = aio.run(
        llmbench.run(
            settings,
            delay_ms=args.delay_ms,
            memories=args.memories,
            queries=args.queries,
            seed=args.seed,
            show_progress=not args.quiet,
        )
    )
    _write(result, llmbench.markdown(result), args)
    return 0


def _load(args, settings) -> int:
    from memlane.bench import loadbench

    if not args.seconds > 0 or not 0.0 <= args.write_share <= 1.0:
        print("memlane bench load: --seconds must be positive and --write-share within 0..1", file=sys.stderr)
        return 2
    url = args.database_url
    if (
        url is not None
        and url != loadbench.STANDALONE
        and not url.startswith(("postgresql://", "postgres://"))
    ):
        print(
            "memlane bench load: --database-url takes postgresql://USER:PASSWORD@HOST:PORT/DB, or "
            f"'{loadbench.STANDALONE}' for a server the bench starts",
            file=sys.stderr,
        )
        return 2
    result = aio.run(
        loadbench.run(
            settings,
            clients=args.clients,
            seconds=args.seconds,
            servers=args.servers,
            write_share=args.write_share,
            config_path=getattr(args, "config", None),
            database_url=url,
        )
    )
    _write(result, loadbench.markdown(result), args)
    return 0


def _backup(args, settings) -> int:
    """Always on a temporary embedded server (bench/backupbench.py): the settings' store is
    never copied."""
    from memlane.bench import backupbench

    result = aio.run(
        backupbench.run(
            args.memories,
            runs=args.runs,
            projects=args.projects,
            seed=args.seed,
            show_progress=not args.quiet,
        )
    )
    _write(result, backupbench.markdown(result), args)
    return 0


def _replica(args, settings) -> int:
    """Always on its own temporary primary and standby (bench/replicabench.py)."""
    from memlane.bench import replicabench

    result = aio.run(
        replicabench.run(pairs=args.pairs, stopped_pairs=args.stopped_pairs, wait_ms=args.wait_ms)
    )
    _write(result, replicabench.markdown(result), args)
    return 0


def _maintain(args, settings) -> int:
    from memlane.bench import maintainbench

    if args.memories < 1 or args.every < 2:
        print("memlane bench maintain: --memories must be positive and --every at least 2", file=sys.stderr)
        return 2
    result = aio.run(
        maintainbench.run(
            settings, args.memories, every=args.every, seed=args.seed, show_progress=not args.quiet
        )
    )
    _write(result, maintainbench.markdown(result), args)
    return 0


def _import(args, settings) -> int:
    from memlane.bench import importbench

    result = aio.run(importbench.run(settings, args.messages, seed=args.seed, show_progress=not args.quiet))
    _write(result, importbench.markdown(result), args)
    return 0


def _topics(args, settings) -> int:
    from memlane.bench import topicsbench

    missing = [f for f in [*args.files, args.taxonomy] if not Path(f).is_file()]
    if missing:
        print(f"memlane bench topics: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    result = aio.run(
        topicsbench.run(settings, [Path(f) for f in args.files], Path(args.taxonomy), llm=args.llm)
    )
    _write(result, topicsbench.markdown(result), args)
    return 0


def _labels(args, settings) -> int:
    from memlane.bench import labelsbench

    if args.data and not Path(args.data).is_file():
        print(f"memlane bench labels: no such file: {args.data}", file=sys.stderr)
        return 2
    result = aio.run(labelsbench.run(settings, Path(args.data) if args.data else None))
    _write(result, labelsbench.markdown(result), args)
    return 0


def _report(args, settings) -> int:
    from memlane.bench import report

    parts = []
    for f in args.files:
        try:
            parts.append(report.render(report.load(f), args.view))
        except (OSError, ValueError, KeyError) as e:
            print(f"memlane bench report: {f}: {e}", file=sys.stderr)
            return 2
    markdown = "\n".join(parts)
    print(markdown)
    if args.markdown:
        Path(args.markdown).write_text(markdown, encoding="utf-8")
    return 0


def _default_locomo() -> Path | None:
    """../shared/locomo next to the checkout (or the working directory), when it is there."""
    here = Path(__file__).resolve().parents[1]
    for base in (Path.cwd(), here):
        candidate = base / ".." / "shared" / "locomo"
        if candidate.is_dir() and any(candidate.glob("*.json")):
            return candidate.resolve()
    return None


def _all(args, settings) -> int:
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    data = Path(args.locomo) if args.locomo else _default_locomo()
    if data is None or not data.exists():
        print(
            "memlane bench all: no LoCoMo data (../shared/locomo or --locomo); skipping locomo",
            file=sys.stderr,
        )
    else:
        ns = argparse.Namespace(
            data=str(data),
            ablate=True,
            quiet=args.quiet,
            json=str(out / "locomo.json"),
            markdown=str(out / "locomo.md"),
            plot=str(out / "locomo.png"),
        )
        _locomo(ns, settings)
    ns = argparse.Namespace(
        memories=args.memories,
        queries=args.queries,
        seed=args.seed,
        pool=DEFAULT_POOL,
        concurrency=DEFAULT_CONCURRENCY,
        keep=False,
        quiet=args.quiet,
        json=str(out / "latency.json"),
        markdown=str(out / "latency.md"),
        plot=str(out / "latency.png"),
    )
    _latency(ns, settings)
    print(f"results in {out}/", file=sys.stderr)
    return 0


def run(args: argparse.Namespace, settings: Any) -> int:
    """The benchmark ``parse`` chose."""
    bench_run: Callable[[argparse.Namespace, Any], int] = args.bench_run
    return bench_run(args, settings)
