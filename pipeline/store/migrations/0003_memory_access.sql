-- Access statistics move out of the memories table. Every recall used to UPDATE the rows it
-- returned: a write on the read path, on the rows whose tsvector the keyword index and the BM25
-- statistics trigger read (the trigger ran, and found nothing to do, on every recall). Now a
-- recall upserts small rows here; forget removes them with the memory.
CREATE TABLE memory_access (
    memory_id        uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    access_count     integer NOT NULL DEFAULT 0,
    last_accessed_at timestamptz
);

INSERT INTO memory_access (memory_id, access_count, last_accessed_at)
    SELECT id, access_count, last_accessed_at FROM memories
     WHERE access_count > 0 OR last_accessed_at IS NOT NULL;

ALTER TABLE memories DROP COLUMN access_count, DROP COLUMN last_accessed_at;
