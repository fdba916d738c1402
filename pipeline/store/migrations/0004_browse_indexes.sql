-- Indexes for the memory browser (server/ui, pipeline/store/browse.py). Its lists page through one
-- project's memories with keyset pagination, newest first by one of three keys; without an index
-- that starts with (project, key), every page would read and sort the whole project (a 100k-memory
-- project: every row, on every page). With one, a page reads its 50 rows and stops.
CREATE INDEX memories_project_created ON memories (project, created_at, id);
-- "when it happened": occurred_at when known, else when it was stored (the browser's date key).
CREATE INDEX memories_project_when ON memories (project, (coalesce(occurred_at, created_at)), id);
CREATE INDEX memories_project_priority ON memories (project, priority, created_at, id);
-- Per-project category counts from the index alone.
CREATE INDEX memories_project_category ON memories (project, category);
