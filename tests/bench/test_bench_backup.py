"""``memlane bench backup``: a small store backed up and restored, the report's layout and table."""

from __future__ import annotations

import pytest

from memlane.bench import backupbench, report
from memlane.pipeline.store import backup as backups


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_backup_bench_times_verified_round_trips_of_a_store_it_builds():
    r = await backupbench.run(300, runs=2, projects=3, show_progress=False)
    assert r["benchmark"] == "backup" and r["store"]["memories"] == 300
    assert r["tables"]["memories"] == 300 and r["tables"]["memlane_projects"] == 3
    assert set(r["tables"]) == set(backups.owned_tables())
    assert len(r["runs"]) == 2 and all(x["backup_s"] > 0 and x["restore_s"] > 0 for x in r["runs"])
    assert r["config"]["engine"]["data_dir"] == "(temporary)"
    text = report.render(r)
    assert "## memlane backup and restore of 300 memories" in text
    assert f"| backup (archive {r['median']['archive_mb']} MB) | {r['median']['backup_s']} s |" in text
