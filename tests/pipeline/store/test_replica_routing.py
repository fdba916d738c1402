"""Where a recall reads with read replicas, without a standby: write positions, the choice when no
replica is up, and the trace fields (tests/server/test_read_replicas.py runs a real standby)."""

from __future__ import annotations

import socket

import pytest

from memlane.pipeline.records import Trace
from memlane.pipeline.store import replicas

pytestmark = pytest.mark.anyio


async def _noop(conn) -> None:
    return None


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once closed


def test_lsns_parse_and_format_both_ways():
    for text in ("0/0", "0/16B3748", "1A/FFFFFFFF", "FFFFFFFF/1"):
        assert replicas.format_lsn(replicas.parse_lsn(text)) == text
    assert replicas.parse_lsn("1/0") > replicas.parse_lsn("0/FFFFFFFF")


def test_the_trace_says_where_a_recall_read_only_when_replicas_are_configured():
    assert "read_from" not in Trace().as_dict()
    t = Trace(read=replicas.ReadRoute("primary", wait_ms=201.23456, reason="behind").trace())
    assert t.as_dict()["read_from"] == "primary"
    assert t.as_dict()["read_wait_ms"] == 201.235 and t.as_dict()["read_reason"] == "behind"


def test_a_read_url_is_named_without_its_credentials():
    assert replicas.replica_name("postgresql://u:secret@db2.internal:6432/mem") == "db2.internal:6432/mem"
    assert "secret" not in replicas.replica_name("host=h port=1 user=u password=secret dbname=d")


async def test_a_caller_keeps_its_latest_write_position_and_an_unknown_one_means_the_primary():
    r = replicas.Replicas([], wait_ms=100, pool_min=1, pool_max=2, configure=_noop, schema_version=1)

    async def at(text):
        return text

    await r.note_write("a", lambda: at("0/200"))
    await r.note_write("a", lambda: at("0/100"))  # reported late (concurrent writes): never lowers it
    assert r.written("a") == 0x200 and r.written("b") is None

    async def broken():
        raise OSError("gone")

    await r.note_write("a", broken)
    assert r.written("a") > 0x200  # unknown: above every position, so the primary answers


async def test_with_no_replica_up_the_primary_answers_at_once_and_says_why():
    url = f"postgresql://u:p@127.0.0.1:{_closed_port()}/db"
    r = replicas.Replicas([url], wait_ms=100, pool_min=1, pool_max=2, configure=_noop, schema_version=1)
    await r.open()
    try:
        route = await r.route("a")
        assert route.read_from == "primary" and route.wait_ms == 0
        assert route.reason.startswith("no replica up (127.0.0.1:") and "p@" not in route.reason
        assert replicas.current_route() is None
    finally:
        await r.close()
