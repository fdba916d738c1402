-- One HNSW index per project (pipeline/store/vectors.py): the projects that have theirs. The index
-- over every project is replaced when the store next opens with a known embedding model (it needs
-- the vector column's dimension, which the model sets).
CREATE TABLE memlane_vector_indexes (
    project    text PRIMARY KEY,
    index_name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
