-- Read-your-writes across servers (pipeline/store/replicas.py): each caller's last write, as the
-- primary's WAL position after it, so a recall through any memlane process on this database waits
-- for a standby to replay it. Callers are hashed (a session id is a bearer secret).
-- Unlogged: read on the primary only and rewritten on every write, so it needs no WAL of its own;
-- a crash of the primary empties it, and each caller's next write records its position again.
CREATE UNLOGGED TABLE IF NOT EXISTS memlane_write_marks (
    caller text PRIMARY KEY,
    lsn pg_lsn NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now()
);
