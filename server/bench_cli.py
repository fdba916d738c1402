"""``memlane bench``: placeholder until the benchmark issue lands."""

from __future__ import annotations


def add_parser(sub) -> None:
    sub.add_parser("bench", help="benchmarks (see README)")


def run(args, settings) -> int:
    raise SystemExit("memlane bench: not available yet")
