-- Standing instructions and preferences (remember/facttypes.py): two more fact types.
ALTER TABLE memories DROP CONSTRAINT IF EXISTS memories_fact_type_check;
ALTER TABLE memories ADD CONSTRAINT memories_fact_type_check
    CHECK (fact_type IN ('world', 'experience', 'opinion', 'instruction', 'preference'));

-- Recall reads a project's few directives on every request, and the instructions resource lists
-- them, through this small partial index.
CREATE INDEX IF NOT EXISTS memories_directives ON memories (project)
    WHERE fact_type IN ('instruction', 'preference') AND superseded_by IS NULL;
