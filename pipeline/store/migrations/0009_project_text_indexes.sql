-- One full-text index per indexed project (pipeline/store/vectors.py), beside its vector index, in
-- place of the index over every project: the keyword arm read the project's rows off its b-tree and
-- ANDed them with the global index's matches, a cost that grew with the whole store. A project below
-- the indexing threshold is read through its b-tree. Index names: 'memories_tsv_' and the first 24
-- hex digits of the SHA-256 of the project's name, as vectors.text_index_name computes them.
DO $$
DECLARE
    p text;
BEGIN
    FOR p IN SELECT project FROM memlane_vector_indexes ORDER BY project LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS %I ON memories USING gin (tsv) WHERE project = %L',
            'memories_tsv_' || left(encode(sha256(convert_to(p, 'UTF8')), 'hex'), 24),
            p
        );
    END LOOP;
END
$$;
DROP INDEX IF EXISTS memories_tsv;
