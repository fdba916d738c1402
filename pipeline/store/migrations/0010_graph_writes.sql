-- The graph tables' foreign keys to memories go; a trigger deletes a memory's links, mentions and
-- mark with it. Each foreign key checked every new row with a share lock on the memory it names,
-- and a relates_to or same_time link names an old memory: the lock rewrote a page of that memory's
-- row in the heap, one random page per link in a large store. Without the check, a link could be
-- written to a memory being deleted; so every transaction that deletes memories first takes the
-- advisory write lock of their projects (pipeline/store/writes.py, _serialise_writes), as the
-- writers do, and a writer's links (all inside one project) see the deletion or come before it.
-- An entity's mentions keep their foreign key to memlane_entities: maintain's deletion of orphan
-- entities counts on that lock.
--
-- Ids stay random (gen_random_uuid()): time-ordered ones (uuidv7) made index inserts cheaper but
-- gave memories stored within a minute the same first 8 hex digits, the handles clients type.
ALTER TABLE memory_links
    DROP CONSTRAINT IF EXISTS memory_links_src_fkey,
    DROP CONSTRAINT IF EXISTS memory_links_dst_fkey;
ALTER TABLE memory_entities DROP CONSTRAINT IF EXISTS memory_entities_memory_id_fkey;
ALTER TABLE memory_linked DROP CONSTRAINT IF EXISTS memory_linked_memory_id_fkey;

CREATE OR REPLACE FUNCTION memlane_graph_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memory_links l USING old_rows o WHERE l.src = o.id;
    DELETE FROM memory_links l USING old_rows o WHERE l.dst = o.id;
    DELETE FROM memory_entities e USING old_rows o WHERE e.memory_id = o.id;
    DELETE FROM memory_linked k USING old_rows o WHERE k.memory_id = o.id;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS memories_graph_delete ON memories;
CREATE TRIGGER memories_graph_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memlane_graph_on_delete();

