"""Geometry of the pages' pictures, computed here and drawn by the templates as inline SVG (no
script, no chart library: the numbers go through the template's escaping like any other text).

Each function takes plain data (a trace as ``Trace.as_dict()``, counts, percentiles) and returns
shapes with coordinates; nothing here knows the names of the recall stages, so a stage added to
the pipeline appears in the pictures by itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any


def status_kind(status: str) -> str:
    """ran / skipped / degraded / failed: the first word of a stage's status, for its badge."""
    kind = status.split(":", 1)[0].strip()
    return kind if kind in ("ran", "skipped", "degraded", "failed") else "other"


def trace_picture(trace: dict[str, Any], width: int = 1100) -> dict[str, Any]:
    """One row per stage in pipeline order: a bar for its time (scaled to the slowest stage) and a
    bar for how many items went in and came out (scaled to the largest count)."""
    stages = trace.get("stages", [])
    label_w, value_w = 120, 130  # the stage's name; the text after each bar
    time_w = (width - label_w - 2 * value_w) * 0.55
    count_w = width - label_w - 2 * value_w - time_w
    row_h = 30
    max_ms = max((s["ms"] for s in stages), default=0.0) or 1.0
    max_n = max((max(s["in"], s["out"]) for s in stages), default=0) or 1
    rows = []
    for i, s in enumerate(stages):
        y = 28 + i * row_h
        rows.append(
            {
                "y": y,
                "text_y": y + 15,
                "stage": s["stage"],
                "kind": status_kind(s["status"]),
                "status": s["status"],
                "ms": s["ms"],
                "time_w": max(2.0, s["ms"] / max_ms * time_w),
                "in": s["in"],
                "out": s["out"],
                "in_w": max(1.0, s["in"] / max_n * count_w) if s["in"] else 0.0,
                "out_w": max(1.0, s["out"] / max_n * count_w) if s["out"] else 0.0,
            }
        )
    return {
        "width": width,
        "height": 36 + len(stages) * row_h,
        "label_w": label_w,
        "time_x": label_w,
        "time_w": time_w,
        "count_x": label_w + time_w + value_w,
        "count_w": count_w,
        "rows": rows,
        "max_ms": max_ms,
        "max_n": max_n,
    }


def bucket_counts(
    per_day: list[tuple[datetime, int]], max_bars: int = 60
) -> tuple[str, list[tuple[str, int]]]:
    """Regroup per-day counts into days, weeks or months so the chart has at most ``max_bars``
    bars; returns (bucket name, [(label, count)])."""
    if not per_day:
        return "day", []
    first, last = per_day[0][0], per_day[-1][0]
    span = (last - first).days + 1
    if span <= max_bars:
        unit, key = "day", (lambda d: d.strftime("%Y-%m-%d"))
    elif span <= max_bars * 7:
        unit, key = "week", (lambda d: (d - timedelta(days=d.weekday())).strftime("%Y-%m-%d"))
    else:
        unit, key = "month", (lambda d: d.strftime("%Y-%m"))
    out: dict[str, int] = {}
    for d, n in per_day:
        out[key(d)] = out.get(key(d), 0) + n
    return unit, list(out.items())


def bar_chart(points: list[tuple[str, int]], width: int = 1100, height: int = 240) -> dict[str, Any]:
    """Vertical bars for counts per bucket, and a line of the running total on its own scale."""
    left, bottom, top = 48, 30, 12
    plot_w, plot_h = width - left - 48, height - bottom - top
    n = len(points)
    max_v = max((v for _, v in points), default=0) or 1
    total = sum(v for _, v in points) or 1
    step = plot_w / n if n else plot_w
    bars: list[dict[str, Any]] = []
    line: list[str] = []
    running = 0
    for i, (label, v) in enumerate(points):
        h = v / max_v * plot_h
        x = left + i * step
        bars.append(
            {
                "x": x + step * 0.1,
                "y": top + plot_h - h,
                "w": max(1.0, step * 0.8),
                "h": h,
                "label": label,
                "value": v,
            }
        )
        running += v
        line.append(f"{x + step / 2:.1f},{top + plot_h - running / total * plot_h:.1f}")
    every = max(1, n // 6)
    ticks = [{"x": b["x"] + b["w"] / 2, "label": b["label"]} for i, b in enumerate(bars) if i % every == 0]
    return {
        "width": width,
        "height": height,
        "left": left,
        "top": top,
        "plot_w": plot_w,
        "plot_h": plot_h,
        "base_y": top + plot_h,
        "bars": bars,
        "line": " ".join(line),
        "ticks": ticks,
        "max_v": max_v,
        "total": sum(v for _, v in points),
    }


def latency_chart(summary: dict[str, Any], width: int = 1100) -> dict[str, Any]:
    """Per stage (and the whole recall), a p50 bar with the p95 as a lighter bar behind it."""
    rows_in = list(summary.get("stages", {}).items())
    if summary.get("total"):
        rows_in.append(("whole recall", summary["total"]))
    label_w, row_h = 130, 26
    plot_w = width - label_w - 120
    max_ms = max((r["p95"] for _, r in rows_in), default=0.0) or 1.0
    rows = []
    for i, (name, r) in enumerate(rows_in):
        y = 10 + i * row_h
        rows.append(
            {
                "y": y,
                "text_y": y + 14,
                "name": name,
                "p50": r["p50"],
                "p95": r["p95"],
                "n": r["n"],
                "p50_w": max(1.0, r["p50"] / max_ms * plot_w),
                "p95_w": max(1.0, r["p95"] / max_ms * plot_w),
            }
        )
    return {
        "width": width,
        "height": 20 + len(rows) * row_h,
        "label_w": label_w,
        "rows": rows,
        "value_x": label_w + plot_w + 8,
    }
