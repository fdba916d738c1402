-- Passages (pipeline/remember/passages.py): the vectors of a long memory's later parts, one row each,
-- so a memory longer than the embedding model's window is found by any part of it. Derived data:
-- the write path makes them with the memory, `memlane maintain --task passages` for memories
-- stored before this table, `memlane reembed` with the memory's own vector.
CREATE TABLE IF NOT EXISTS memory_passages (
    memory_id uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    part      smallint NOT NULL,
    -- The memory's project (which never changes): a project's passages have their own HNSW index
    -- as its memories do (store/vectors.py).
    project   text NOT NULL,
    embedding vector NOT NULL,
    PRIMARY KEY (memory_id, part)
);
CREATE INDEX IF NOT EXISTS memory_passages_project ON memory_passages (project);

-- The column takes the dimension of the model the store records (as memories.embedding has), so
-- the projects' HNSW indexes can be built on it.
DO $$
DECLARE dim text;
BEGIN
    SELECT value INTO dim FROM memlane_settings WHERE key = 'embedding_dim';
    IF dim IS NOT NULL THEN
        EXECUTE format('ALTER TABLE memory_passages ALTER COLUMN embedding TYPE vector(%s)', dim::int);
    END IF;
END $$;

-- The indexed projects get their passages' index.
DO $$
DECLARE p text;
BEGIN
    IF EXISTS (SELECT 1 FROM memlane_settings WHERE key = 'embedding_dim') THEN
        FOR p IN SELECT project FROM memlane_vector_indexes LOOP
            EXECUTE format(
                'CREATE INDEX IF NOT EXISTS %I ON memory_passages USING hnsw (embedding vector_cosine_ops)'
                ' WITH (m = 8, ef_construction = 32) WHERE project = %L',
                'passages_vec_' || left(encode(sha256(convert_to(p, 'UTF8')), 'hex'), 24), p);
        END LOOP;
    END IF;
END $$;
