-- Supersession (pipeline/remember/supersede.py): a memory that a newer one replaces keeps its row,
-- with the id of the memory that replaced it and the time its value stopped being true. Nothing is
-- deleted: recall ranks the successor first for questions about the present, and the older one
-- still answers questions about the past.
ALTER TABLE memories
    ADD COLUMN IF NOT EXISTS superseded_by uuid,
    ADD COLUMN IF NOT EXISTS valid_until timestamptz;

-- Recall looks up the successors of superseded candidates, forget the memories a deleted one
-- superseded: both by this column, set on few rows.
CREATE INDEX IF NOT EXISTS memories_superseded_by ON memories (superseded_by)
    WHERE superseded_by IS NOT NULL;

-- A memory deleted (forget, a merge, a project dropped) no longer replaces anything: what it
-- superseded is current again. No foreign key, as for the graph's tables (migration 0010): a
-- trigger of the deleting statement does it, under the projects' write lock the deleters take.
CREATE OR REPLACE FUNCTION memlane_supersession_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE memories m SET superseded_by = NULL, valid_until = NULL
        FROM old_rows o WHERE m.superseded_by = o.id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS memories_supersession_delete ON memories;
CREATE TRIGGER memories_supersession_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memlane_supersession_on_delete();
