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


async def test_write_positions_are_shared_by_every_process_and_never_move_back(engine):
    store = engine.store

    def replicas_of_a_process():  # what each memlane process on the database holds
        return replicas.Replicas(
            [], wait_ms=100, pool_min=1, pool_max=2, configure=_noop, schema_version=1, marks=store
        )

    one, two = replicas_of_a_process(), replicas_of_a_process()
    assert await one.written("token:alice") is None
    await engine.remember({"content": "the staging cluster runs in eu-west"})
    await one.note_write("token:alice")
    first = await two.written("token:alice")  # the other process knows alice's write
    assert first is not None and first == await one.written("token:alice")
    assert await two.written("token:bob") is None  # and only hers
    await engine.remember({"content": "the staging cluster moved to eu-north"})
    await two.note_write("token:alice")
    later = await one.written("token:alice")
    assert later > first
    # A mark reported late (two writes finishing in either order) never lowers it.
    assert replicas.parse_lsn(await store.mark_write(replicas.caller_mark("token:alice"))) >= later
    async with store._connection() as conn:
        await conn.execute(
            "UPDATE memlane_write_marks SET lsn = %s::pg_lsn WHERE caller = %s",
            (replicas.format_lsn(first), replicas.caller_mark("token:alice")),
        )
    assert await two.written("token:alice") == later  # its own record beside the primary's
    # Callers are stored hashed: a session id lets whoever holds it act in that session.
    await one.note_write("session:5f1c-secret-session")
    async with store._connection() as conn:
        cur = await conn.execute("SELECT caller FROM memlane_write_marks")
        keys = [k for (k,) in await cur.fetchall()]
    assert not any("secret" in k or "alice" in k for k in keys) and len(keys) == 2


async def test_old_marks_are_pruned_and_an_unreadable_mark_means_the_primary(engine):
    store = engine.store
    r = replicas.Replicas(
        [], wait_ms=100, pool_min=1, pool_max=2, configure=_noop, schema_version=1, marks=store
    )
    await r.note_write("token:old")
    async with store._connection() as conn:
        await conn.execute("UPDATE memlane_write_marks SET written_at = now() - interval '2 hours'")
    await store.mark_write(replicas.caller_mark("token:new"), replicas.MARK_TTL_S)
    assert await store.write_mark(replicas.caller_mark("token:old")) is None
    assert await store.write_mark(replicas.caller_mark("token:new")) is not None

    async with store._connection() as conn:  # the table cannot be written: the write position is unknown
        await conn.execute("ALTER TABLE memlane_write_marks RENAME TO memlane_write_marks_away")
    try:
        await r.note_write("token:new")
        assert await r.written("token:new") > replicas.parse_lsn("FFFFFFFF/0")  # the primary answers
    finally:
        async with store._connection() as conn:
            await conn.execute("ALTER TABLE memlane_write_marks_away RENAME TO memlane_write_marks")


async def test_with_no_replica_up_the_primary_answers_at_once_and_says_why():
    url = f"postgresql://u:p@127.0.0.1:{_closed_port()}/db"
    r = replicas.Replicas(
        [url], wait_ms=100, pool_min=1, pool_max=2, configure=_noop, schema_version=1, marks=None
    )
    await r.open()
    try:
        route = await r.route("a")
        assert route.read_from == "primary" and route.wait_ms == 0
        assert route.reason.startswith("no replica up (127.0.0.1:") and "p@" not in route.reason
        assert replicas.current_route() is None
    finally:
        await r.close()
