-- Supersession (pipeline/remember/supersede.py): a memory that a newer one replaces keeps its row,
-- with the id of the memory that replaced it and the time its value stopped being true. Nothing is
-- deleted: recall ranks the successor first for questions about the present, and the older one
-- still answers questions about the past.
ALTER TABLE memories
    ADD COLUMN IF NOT EXISTS superseded_by uuid,
    ADD COLUMN IF NOT EXISTS valid_until timestamptz,
    -- Memories it contradicts where nothing says which is right ("I never went to Japan" and "I went
    -- to Japan in 2019"): both stay current, each names the other, for the client to ask.
    ADD COLUMN IF NOT EXISTS conflicts_with uuid[];

-- Recall looks up the successors of superseded candidates, forget the memories a deleted one
-- superseded: both by this column, set on few rows.
CREATE INDEX IF NOT EXISTS memories_superseded_by ON memories (superseded_by)
    WHERE superseded_by IS NOT NULL;

-- An update keeps what it replaces: each earlier content (with its date, category, tags and
-- metadata) is a numbered version of the memory, oldest first.
CREATE TABLE IF NOT EXISTS memory_versions (
    memory_id   uuid NOT NULL,
    version     integer NOT NULL,
    content     text NOT NULL,
    occurred_at timestamptz,
    category    text,
    tags        text[],
    metadata    jsonb,
    replaced_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, version)
);

-- A memory deleted (forget, a merge, a project dropped) takes its versions with it and no longer
-- replaces or contradicts anything: what it superseded is current again. No foreign keys, as for
-- the graph's tables (migration 0010): a trigger of the deleting statement does it, under the
-- projects' write lock the deleters take.
CREATE OR REPLACE FUNCTION memlane_history_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_versions v USING old_rows o WHERE v.memory_id = o.id;
    UPDATE memories m SET superseded_by = NULL, valid_until = NULL
        FROM old_rows o WHERE m.superseded_by = o.id;
    UPDATE memories m
        SET conflicts_with = nullif(ARRAY(SELECT c FROM unnest(m.conflicts_with) c
                                          WHERE c NOT IN (SELECT id FROM old_rows)), '{}')
        WHERE m.conflicts_with && ARRAY(SELECT id FROM old_rows);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS memories_history_delete ON memories;
CREATE TRIGGER memories_history_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memlane_history_on_delete();
