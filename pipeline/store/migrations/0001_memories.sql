-- The memories table. The embedding column gets its dimension (and its HNSW index) when the
-- first embedding model is recorded: see Store.ensure_model.
CREATE EXTENSION IF NOT EXISTS vector;

CREATE TABLE memlane_settings (
    key   text PRIMARY KEY,
    value text NOT NULL
);

CREATE TABLE memories (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project          text NOT NULL,
    content          text NOT NULL,
    -- sha256 of content and occurred_at: the same words said at another time are another memory.
    content_hash     text NOT NULL,
    embedding        vector,
    tsv              tsvector GENERATED ALWAYS AS (to_tsvector('english'::regconfig, content)) STORED,
    category         text,
    tags             text[] NOT NULL DEFAULT '{}',
    metadata         jsonb NOT NULL DEFAULT '{}'::jsonb,
    pinned           boolean NOT NULL DEFAULT false,
    priority         smallint NOT NULL DEFAULT 3,
    access_count     integer NOT NULL DEFAULT 0,
    last_accessed_at timestamptz,
    occurred_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    expires_at       timestamptz,
    source           text
);

CREATE UNIQUE INDEX memories_project_hash ON memories (project, content_hash);
CREATE INDEX memories_tsv ON memories USING gin (tsv);
CREATE INDEX memories_project_occurred ON memories (project, occurred_at);
CREATE INDEX memories_tags ON memories USING gin (tags);
