"""``UuidArray``: memory ids sent as one binary uuid[] (store/uuid_array.py) reach PostgreSQL as the
same array, in the same order, as psycopg's own element-by-element dumping sends."""

from __future__ import annotations

import uuid

import pytest

from memlane.pipeline.store.uuid_array import UuidArray

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("n", [0, 1, 2, 37])
async def test_ids_arrive_whole_and_in_order(engine, n):
    ids = [uuid.uuid4() for _ in range(n)]
    async with engine.store.pool.connection() as conn:
        cur = await conn.execute(
            "SELECT %(a)b::uuid[], %(b)s::uuid[], cardinality(%(a)b::uuid[]),"
            " ARRAY(SELECT x FROM unnest(%(a)b::uuid[]) WITH ORDINALITY AS u(x, i) ORDER BY i)",
            {"a": UuidArray(ids), "b": ids},
        )
        ours, psycopgs, count, unnested = await cur.fetchone()
    assert ours == psycopgs == ids
    assert count == n
    assert unnested == ids


async def test_an_array_built_from_a_generator_or_a_tuple_is_the_same(engine):
    ids = (uuid.uuid4(), uuid.uuid4(), uuid.uuid4())
    async with engine.store.pool.connection() as conn:
        cur = await conn.execute("SELECT %b::uuid[], %b::uuid[]", (UuidArray(ids), UuidArray(i for i in ids)))
        a, b = await cur.fetchone()
    assert a == b == list(ids)
