-- The memory graph: entities named in memories, and typed links between memories.
-- Written in the same transaction as the memories they describe (see pipeline/store/graph.py);
-- ``memlane maintain --task links`` builds them for memories stored before this migration (those
-- without a row in memory_linked) and deletes entities no memory mentions any more.

-- One node per entity per project: ``key`` is the normalised form (lower case, possessive dropped),
-- ``name`` how it was first written, ``kind`` what the extractor took it for.
CREATE TABLE memlane_entities (
    id      bigserial PRIMARY KEY,
    project text NOT NULL,
    key     text NOT NULL,
    name    text NOT NULL,
    kind    text NOT NULL,
    UNIQUE (project, key)
);

-- memory <-> entity mentions. Forgetting a memory removes its mentions with it.
CREATE TABLE memory_entities (
    memory_id uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE ON UPDATE CASCADE,
    entity_id bigint NOT NULL REFERENCES memlane_entities (id) ON DELETE CASCADE,
    PRIMARY KEY (memory_id, entity_id)
);
-- entity -> its memories (the second hop of memory -> entity -> memory).
CREATE INDEX memory_entities_entity ON memory_entities (entity_id, memory_id);

-- Typed memory -> memory links. ``relates_to``: from a memory to one of its nearest earlier
-- memories (weight: cosine similarity); ``next``: consecutive pieces of one source (the reverse
-- direction is ``previous``); ``same_time``: a bounded number of earlier memories that happened
-- the same day; ``causes``: reported by an LLM extractor. Both directions are index lookups.
CREATE TABLE memory_links (
    src    uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE ON UPDATE CASCADE,
    dst    uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE ON UPDATE CASCADE,
    kind   text NOT NULL CHECK (kind IN ('relates_to', 'next', 'same_time', 'causes')),
    weight real NOT NULL DEFAULT 1.0,
    PRIMARY KEY (src, kind, dst),
    CHECK (src <> dst)
);
CREATE INDEX memory_links_dst ON memory_links (dst, kind, src);

-- Which memories have had their entities and links made (the write path does it for every new
-- memory; maintain for older ones). ``version`` of the extractor, so a better one can redo them.
CREATE TABLE memory_linked (
    memory_id uuid PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE ON UPDATE CASCADE,
    version   smallint NOT NULL DEFAULT 1,
    linked_at timestamptz NOT NULL DEFAULT now()
);
