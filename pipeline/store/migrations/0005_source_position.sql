-- Where a memory sits in its source: the n-th turn of a conversation, the n-th chunk of a document.
-- ``source`` names the conversation or document; ``position`` orders its pieces (0-based). Both are
-- optional: a memory remembered on its own has neither. Ingest sets both; the graph links
-- neighbours of one source with next/previous edges in this order.
ALTER TABLE memories ADD COLUMN position integer CHECK (position >= 0);
CREATE INDEX memories_source_position ON memories (project, source, position) WHERE source IS NOT NULL;
