-- The HTTP transports' rate limit (server/auth/http.py): one token bucket per token name for every
-- memlane process on this database, so N servers behind a balancer give a token the configured rate,
-- not N times it. Each bucket is refilled by the database's clock, the one clock all servers share.
-- Unlogged: read and written on the primary only, on every request with a token, so it needs no WAL;
-- a crash of the primary empties it, which gives every token a full bucket once.
CREATE UNLOGGED TABLE IF NOT EXISTS memlane_rate_buckets (
    principal text PRIMARY KEY,
    tokens float8 NOT NULL,
    admitted boolean NOT NULL,
    at timestamptz NOT NULL
);
