"""A data directory an earlier crash left half-initialised (initdb killed, the machine's power): the
next start clears it and starts, when no server ever ran on it; it explains one that also holds
files memlane did not write; and it never clears a directory a server ran on."""

from __future__ import annotations

import logging

import psycopg
import pytest
from support.postmaster import release_embedded

from memlane.pipeline.errors import StoreError
from memlane.pipeline.store.embedded import SETTINGS_FILE, EmbeddedPostgres

pytestmark = pytest.mark.slow


def _as_initdb_left_it(data_dir):
    """What initdb has written a second into its run: the version, the configuration, part of the
    bootstrap's files; no memlane settings, and no server ever started (no postmaster.opts)."""
    pg = data_dir / "pg"
    (pg / "base" / "1").mkdir(parents=True)
    (pg / "global").mkdir()
    (pg / "pg_wal").mkdir()
    (pg / "PG_VERSION").write_text("18\n")
    (pg / "postgresql.conf").write_text("# half written\n")
    (pg / "base" / "1" / "1259").write_bytes(b"\0" * 8192)
    (pg / "postmaster.pid").write_text("-4194000\n")  # initdb's standalone backend, killed with it
    return pg


def test_a_directory_initdb_left_unfinished_is_cleared_and_the_server_starts(own_data_dir, caplog):
    pg = _as_initdb_left_it(own_data_dir)
    with caplog.at_level(logging.WARNING, logger="memlane.pipeline.store.embedded"):
        dsn = EmbeddedPostgres(own_data_dir).start()
    assert "was not initialised completely" in caplog.text and "cleared it" in caplog.text
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = 'template1'").fetchone() == (1,)
    assert (pg / SETTINGS_FILE).exists() and (pg / "global" / "pg_control").exists()


def test_an_unfinished_directory_with_files_memlane_did_not_write_is_explained_not_cleared(own_data_dir):
    pg = _as_initdb_left_it(own_data_dir)
    (pg / "notes.txt").write_text("mine")
    with pytest.raises(StoreError) as e:
        EmbeddedPostgres(own_data_dir).start()
    assert "not initialised completely" in str(e.value) and "notes.txt" in str(e.value)
    assert "no server ever ran on it" in str(e.value)
    assert (pg / "notes.txt").read_text() == "mine" and (pg / "PG_VERSION").exists()


def test_a_directory_a_server_ran_on_is_never_cleared_even_without_memlanes_settings(own_data_dir):
    dsn = EmbeddedPostgres(own_data_dir).start()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
    release_embedded(own_data_dir)  # the server stops
    (own_data_dir / "pg" / SETTINGS_FILE).unlink()  # as if written by a memlane without that file
    dsn = EmbeddedPostgres(own_data_dir).start()
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (0,)
    assert (own_data_dir / "pg" / SETTINGS_FILE).exists()
