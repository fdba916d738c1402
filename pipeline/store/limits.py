"""The HTTP rate limit's buckets (migration 0012), shared by every memlane process on the database:
``server/auth/http.py`` takes a request's token here, on the primary."""

from __future__ import annotations

from memlane.pipeline.store.base import StorePart, one_row

# One statement per request: the bucket refilled by the time since its last request (by the
# database's clock, the one every server shares), capped at the burst, then one token taken if a
# whole one is there. The row lock orders concurrent requests of one token, whichever server they
# reach; one that waited for the lock may have started before the last update (never a negative
# refill, never an earlier ``at``). ``admitted`` says whether this request got its token: the count
# alone cannot (0.5 left after taking one, or 0.5 short of one).
_HAVE = "least(%(burst)s, b.tokens + greatest(extract(epoch FROM now() - b.at)::float8, 0) * %(rate)s)"
_TAKE = (
    "INSERT INTO memlane_rate_buckets AS b (principal, tokens, admitted, at)"
    " VALUES (%(principal)s, %(burst)s - 1, true, now())"
    " ON CONFLICT (principal) DO UPDATE SET"
    f" tokens = CASE WHEN {_HAVE} >= 1 THEN {_HAVE} - 1 ELSE {_HAVE} END,"
    f" admitted = {_HAVE} >= 1,"
    " at = greatest(b.at, now())"
    " RETURNING b.admitted, b.tokens"
)


class RateBuckets(StorePart):
    """Mixed into Store; needs ``_connection()``."""

    async def take_rate_token(self, principal: str, per_minute: float, burst: int) -> float:
        """Take one request's token from ``principal``'s bucket (``burst`` at most, refilled at
        ``per_minute``): 0.0 when the request may go ahead, else the seconds until it could."""
        rate = per_minute / 60.0
        async with self._connection() as conn:
            cur = await conn.execute(_TAKE, {"principal": principal, "burst": float(burst), "rate": rate})
            admitted, tokens = await one_row(cur)
        return 0.0 if admitted else (1.0 - tokens) / rate
