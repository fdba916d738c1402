"""The standalone server the scale-out tests and ``bench load`` run memlane against."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import psycopg
import pytest

# The session's standalone server (initdb, pg_ctl) and, for the standby, a second one.
pytestmark = pytest.mark.slow


def test_the_app_role_is_no_superuser_and_has_pgvector(external_url):
    with psycopg.connect(external_url) as conn:
        user, superuser = conn.execute(
            "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        [version] = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert user.startswith("app_") and superuser is False
    assert version.count(".") == 2


def test_a_standby_streams_and_replays_the_primary(external_pg):
    standby = external_pg.standby(Path(tempfile.mkdtemp(prefix="memlane-test-standby-")))
    try:
        standby.wait_replaying(external_pg)
        external_pg.execute("CREATE TABLE IF NOT EXISTS replicated (n int)")
        external_pg.execute("INSERT INTO replicated VALUES (42)")
        [[lsn]] = external_pg.execute("SELECT pg_current_wal_lsn()::text")
        for _ in range(200):
            [[done]] = standby.execute(f"SELECT pg_last_wal_replay_lsn() >= '{lsn}'::pg_lsn")
            if done:
                break
            time.sleep(0.05)
        assert standby.execute("SELECT pg_is_in_recovery()") == [(True,)]
        assert standby.execute("SELECT n FROM replicated") == [(42,)]
    finally:
        standby.stop()
    assert not standby.running()
