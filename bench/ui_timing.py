"""Page timings of the memory browser on a large store.

    python -m memlane.bench.ui_timing 100000 /tmp/memlane-ui-100k

Fills project ``big`` of the embedded store in DIR up to N synthetic memories (template sentences,
random unit-scale vectors: list and keyword timings are real, vector scores meaningless), then
loads every page through the ASGI app in-process and prints the median of several loads after a
warm-up: server time (routing, database, rendering), no network.

Rows are written with SQL directly, not through remember: embedding 100k sentences would take
minutes and is not what is measured. The HNSW index is dropped for the fill and built again after:
built once, it takes a fraction of the time row-by-row insertion would.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import time
from html import unescape
from pathlib import Path

import httpx2 as httpx

from memlane.bench.common import admin_connection
from memlane.pipeline.config import EngineConfig
from memlane.pipeline.engine import Engine
from memlane.pipeline.store import vectors
from memlane.server.ui.app import create_app
from memlane.server.ui.metrics import RecallLog

PEOPLE = "alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil trent victor walter yasmin"
VERBS = (
    "prefers decided fixed broke reviewed deployed migrated discussed scheduled cancelled approved rejected"
)
THINGS = "postgres billing invoices login dashboard webhooks refunds taxes kubernetes redis kafka terraform grafana api docs tests"
CATEGORIES = ["preference", "decision", "fact", "incident", "person", "todo"]

FILL = """
INSERT INTO memories (project, content, content_hash, embedding, category, tags, priority, pinned,
                      occurred_at, created_at, topics, fact_type)
SELECT 'big', c, md5(c || g), e, (%(cats)s::text[])[1 + g %% 6], ARRAY[(%(things)s::text[])[1 + g %% 16]],
       1 + g %% 5, g %% 97 = 0,
       now() - (g %% 700) * interval '1 day', now() - (g %% 700) * interval '1 day' - g * interval '1 second',
       ARRAY[(%(things)s::text[])[1 + (g / 240) %% 16]], (ARRAY['world', 'experience', 'opinion'])[1 + g %% 3]
  FROM (SELECT g,
               (%(people)s::text[])[1 + g %% 20] || ' ' || (%(verbs)s::text[])[1 + (g / 20) %% 12] || ' the '
               || (%(things)s::text[])[1 + (g / 240) %% 16] || ' ' || (%(things)s::text[])[1 + (g / 7) %% 16]
               || ' change number ' || g || ' during sprint ' || (g %% 50) AS c,
               -- WHERE g > 0 ties the vector to the row, so each row gets its own
               (SELECT array_agg(random() - 0.5) FROM generate_series(1, 384) WHERE g > 0)::vector AS e
          FROM generate_series(%(lo)s::int, %(hi)s::int) AS g) AS s
"""


async def fill(engine: Engine, n: int) -> None:
    have = (await engine.store.stats(["big"]))["memories"]
    if have >= n:
        return
    async with admin_connection(engine.store) as conn:
        await conn.execute(f"DROP INDEX IF EXISTS {vectors.index_name('big')}")
        words = {
            "cats": CATEGORIES,
            "things": THINGS.split(),
            "people": PEOPLE.split(),
            "verbs": VERBS.split(),
        }
        for lo in range(have + 1, n + 1, 20000):
            await conn.execute(FILL, {**words, "lo": lo, "hi": min(n, lo + 19999)})
            print(f"stored {min(n, lo + 19999)} memories", flush=True)
        # The automatic topics with their counts, as the write path keeps them (memlane_topics).
        await conn.execute(
            "INSERT INTO memlane_topics (project, name, centroid_sum, members)"
            " SELECT 'big', t, array_fill(0, ARRAY[384])::vector, count(*) FROM memories, unnest(topics) AS t"
            " WHERE project = 'big' GROUP BY t"
            " ON CONFLICT (project, name) DO UPDATE SET members = excluded.members"
        )
        await conn.execute("SET maintenance_work_mem = '512MB'")
        async with conn.transaction():
            await vectors.create_index(conn, "big")
        # 1% recalled now and then, so "most recalled" has rows to sort.
        await conn.execute(
            "INSERT INTO memory_access SELECT id, (random() * 50)::int + 1, now() FROM memories"
            " WHERE project = 'big' AND random() < 0.01 ON CONFLICT DO NOTHING"
        )
        await conn.execute("VACUUM ANALYZE memories")  # what autovacuum would do before anyone browses


def _first(pattern: str, page: str) -> str:
    """The first group of ``pattern`` in ``page``; a page that lost it stops the run by name."""
    found = re.search(pattern, page)
    if found is None:
        raise RuntimeError(f"no {pattern!r} in the page")
    return found.group(1)


async def measure(n: int, data_dir: Path, runs: int) -> None:
    engine = Engine(EngineConfig(data_dir=data_dir))
    await engine.open()
    try:
        await asyncio.to_thread(engine.runtime.warm)
        await engine.remember_many(
            [{"content": f"small project note {i}", "project": "small"} for i in range(20)]
        )
        await fill(engine, n)

        async def get_engine() -> Engine:
            return engine

        app = create_app(get_engine, allowed_hosts=["testserver"], recalls=RecallLog())
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver"
        ) as c:
            r = await c.get("/projects/big")
            memory_id = _first(r'href="/memories/([0-9a-f-]+)"', r.text)
            deep, hops = "/projects/big", min(190, n // 50 - 5)
            for _ in range(hops):  # follow the "next page" links to a page deep in the list
                nxt = _first(r'id="next-page" href="\?([^"]+)"', (await c.get(deep)).text)
                deep = "/projects/big?" + unescape(nxt)
            pages = {
                "projects (/)": "/",
                "list, first page": "/projects/big",
                f"list, page {hops + 1} (keyset)": deep,
                "list, sort=priority": "/projects/big?sort=priority",
                "list, sort=occurred + date range": "/projects/big?sort=occurred&since=2025-01-01&until=2025-06-01",
                "list, category + tag filter": "/projects/big?category=incident&tag=redis",
                "list, pinned": "/projects/big?pinned=yes",
                "list, topic filter": "/projects/big?topic=redis",
                "list, topic + fact type filter": "/projects/big?topic=redis&fact_type=opinion",
                "search (?q=, recall)": "/projects/big?q=who+migrated+the+billing+database",
                "one memory": f"/memories/{memory_id}",
                "recall explorer": "/recall?project=big&q=who+migrated+the+billing+database&mode=full",
                "stats": "/stats",
            }
            print(f"{n} memories in project 'big'; median of {runs} loads after one warm-up")
            for name, path in pages.items():
                await c.get(path)
                times = []
                for _ in range(runs):
                    t0 = time.perf_counter()
                    r = await c.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    if r.status_code != 200:
                        raise RuntimeError(f"{path} answered {r.status_code}")
                print(
                    f"{name:34s} {statistics.median(times):7.1f} ms  (min {min(times):.1f}, max {max(times):.1f})"
                )
    finally:
        await engine.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Time the memory browser's pages on a large store.")
    p.add_argument("memories", type=int, help="store size, e.g. 100000")
    p.add_argument(
        "data_dir", type=Path, help="embedded database directory (kept, so a second run skips the fill)"
    )
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args(argv)
    asyncio.run(measure(args.memories, args.data_dir, args.runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
