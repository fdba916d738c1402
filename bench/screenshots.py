"""``make screenshots``: PNGs of every page of the memory browser, over a seeded demo store.

Starts an embedded database in a temporary directory, stores a small demo (three projects, dates
over a few months, some recalls so "most recalled" has something to show), runs ``memlane ui`` on a
free loopback port and photographs each page with headless Chromium. Needs selenium (the ``test``
extra) and Debian's chromium + chromium-driver.

    python -m memlane.bench.screenshots --output bench/results/ui
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memlane.bench.common import admin_connection
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.engine import Engine

NOW = datetime.now(UTC)

DEMO: dict[str, list[tuple[str, str, list[str], int, int]]] = {
    # project: [(content, category, tags, priority, days ago)]
    "acme-billing": [
        (
            "We picked PostgreSQL for billing because invoices need real transactions",
            "decision",
            ["db"],
            5,
            92,
        ),
        ("Invoices are generated on the first business day of each month", "fact", ["invoices"], 3, 88),
        ("Alice owns the billing service; ask her before changing the schema", "person", ["owner"], 4, 80),
        (
            "The Friday deploy broke the login page for an hour: a missing migration",
            "incident",
            ["deploy"],
            4,
            61,
        ),
        ("Never deploy on Fridays after 3pm", "decision", ["deploy"], 5, 60),
        (
            "Stripe webhooks are retried for three days; handlers must be idempotent",
            "fact",
            ["stripe"],
            4,
            45,
        ),
        ("Tax rates come from the finance team's spreadsheet, updated quarterly", "fact", ["tax"], 3, 40),
        ("Bob is the on-call engineer for payments this quarter", "person", ["on-call"], 3, 21),
        ("Refunds over 500 EUR need a second approval", "decision", ["refunds"], 4, 14),
        (
            "The billing dashboard is slow because of an unindexed customer_id column",
            "incident",
            ["perf"],
            3,
            6,
        ),
        ("Use ISO 4217 currency codes everywhere, never symbols", "preference", ["style"], 3, 3),
        (
            "<script>alert('hi')</script> is how a memory with markup looks: shown as text",
            "fact",
            ["demo"],
            1,
            1,
        ),
    ],
    "home": [
        ("The user prefers tabs over spaces and a dark editor theme", "preference", ["editor"], 3, 120),
        ("Dentist appointment every six months; the last one was in March", "todo", ["health"], 2, 70),
        ("Sam's birthday is on the 14th of July; likes climbing", "person", ["family"], 4, 50),
        ("The user is vegetarian and allergic to peanuts", "preference", ["food"], 5, 30),
        ("The car's next service is due at 60,000 km", "todo", ["car"], 2, 9),
    ],
    "research": [
        ("Reciprocal rank fusion uses k = 60 (Cormack et al. 2009)", "fact", ["retrieval"], 3, 33),
        ("BM25 lifted keyword R@5 from 0.524 to 0.579 on the LoCoMo dev set", "fact", ["eval"], 4, 27),
        ("Score fusion beats RRF at R@1 and R@5 on LoCoMo", "decision", ["retrieval"], 4, 20),
        ("HyDE helps on vague questions but costs one LLM round trip", "fact", ["llm"], 3, 12),
    ],
}

QUESTIONS = [
    ("acme-billing", "which database did we pick for billing and why?"),
    ("acme-billing", "can we deploy on Friday?"),
    ("acme-billing", "who is on call for payments?"),
    ("home", "what should I cook for the user?"),
    ("research", "how does fusion compare with RRF?"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def seed(config: EngineConfig) -> tuple[str, int]:
    """Store the demo; returns the ids of the memory and the entity to photograph."""
    engine = Engine(config)
    await engine.open()
    try:
        await asyncio.to_thread(engine.runtime.warm)
        chosen = None
        for project, items in DEMO.items():
            for content, category, tags, priority, days in items:
                out = await engine.remember(
                    {
                        "content": content,
                        "project": project,
                        "category": category,
                        "tags": tags,
                        "priority": priority,
                        "pinned": priority == 5,
                        "occurred_at": (NOW - timedelta(days=days)).isoformat(),
                        "metadata": {"source": "demo", "conversation": f"c-{days}"},
                        "source": "demo",
                    }
                )
                if content.startswith("We picked PostgreSQL"):
                    chosen = str(out.id)
        # Demo only: date each row as if it had been stored when it happened, so the stats chart has
        # a history. No product path writes created_at; this goes straight to the demo database.
        async with admin_connection(engine.store) as conn:
            await conn.execute("UPDATE memories SET created_at = occurred_at, updated_at = occurred_at")
        for project, question in QUESTIONS * 2:  # recalls that count accesses: "most recalled"
            await engine.recall({"query": question, "project": project})
        # The entity page: the billing project's most mentioned entity.
        listed = (await engine.store.project_entities("acme-billing", limit=500)).entities
        entity = max(listed, key=lambda e: (e.mentions, e.name))
        assert chosen is not None, "DEMO lost the memory the memory page photographs"
        return chosen, entity.id
    finally:
        await engine.close()


def shoot(base: str, memory_id: str, entity_id: int, output: Path) -> list[Path]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--hide-scrollbars"):
        options.add_argument(arg)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        options.binary_location = chromium
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options
    )
    pages = [
        ("projects", "/"),
        ("project", "/projects/acme-billing"),
        ("search", "/projects/acme-billing?q=deploy+on+friday"),
        ("memory", f"/memories/{memory_id}"),
        ("entities", "/projects/acme-billing/entities"),
        ("entity", f"/entities/{entity_id}"),
        (
            "recall",
            "/recall?project=acme-billing&q=which+database+did+we+pick+for+billing+and+why%3F&mode=full",
        ),
        ("stats", "/stats"),
    ]
    written = []
    try:
        for project, question in QUESTIONS:  # this process's recalls, for the latency chart
            driver.get(f"{base}/recall?project={project}&q={question}")
        for name, path in pages:
            metrics = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
            driver.get(base + path)
            height = driver.execute_script("return document.documentElement.scrollHeight")
            # The whole page in one picture: a viewport as tall as the page.
            metrics["height"] = min(max(height, 600), 4000)
            driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
            target = output / f"{name}.png"
            driver.save_screenshot(str(target))
            written.append(target)
    finally:
        driver.quit()
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", default="bench/results/ui", help="where the PNGs go")
    args = p.parse_args(argv)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix="memlane-screenshots-"))
    # Removed at exit, after pgserver's own exit handler (registered later, so run earlier) has
    # stopped the embedded server that lives in it.
    atexit.register(shutil.rmtree, data_dir, True)
    config = EngineConfig(data_dir=data_dir)
    memory_id, entity_id = asyncio.run(seed(config))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMLANE_")}
    memlane = str(Path(sys.executable).with_name("memlane"))
    proc = subprocess.Popen([memlane, "--data-dir", str(data_dir), "ui", "--port", str(port)], env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    print("memlane ui did not start", file=sys.stderr)
                    return 1
                time.sleep(0.2)
        for path in shoot(f"http://127.0.0.1:{port}", memory_id, entity_id, output):
            print(path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
