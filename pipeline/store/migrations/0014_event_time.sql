-- Event time (pipeline/time/events.py): the time a memory's content names ("yesterday", "last
-- month"), resolved against when it was said, as a range beside occurred_at. NULL: it names none,
-- or it was stored before this column (`memlane maintain --task event_times` fills those).
ALTER TABLE memories
    ADD COLUMN IF NOT EXISTS event_start timestamptz,
    ADD COLUMN IF NOT EXISTS event_end timestamptz;

-- The temporal arm reads the memories whose event time overlaps a question's range.
CREATE INDEX IF NOT EXISTS memories_event_time ON memories USING gist (tstzrange(event_start, event_end))
    WHERE event_start IS NOT NULL;

-- A new store has nothing to fill in: the task is done before it starts.
INSERT INTO memlane_settings (key, value)
SELECT 'maintain.event_times', 'done' WHERE NOT EXISTS (SELECT 1 FROM memories)
ON CONFLICT (key) DO NOTHING;
