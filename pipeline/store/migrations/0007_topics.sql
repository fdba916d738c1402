-- Topics, fact types and category summaries (issue 7).
--
-- ``topics``: the memory's topics, best first (its first topic became its category when the caller
-- gave none). NULL means "not assigned yet": memories stored before this migration, until
-- ``memlane maintain --task summaries`` assigns them; '{}' means assigned, none fitted.
-- ``fact_type``: world (a fact about the world or others), experience (something the user or the
-- assistant did or went through) or opinion (a preference, belief or judgement); NULL until assigned.
ALTER TABLE memories ADD COLUMN topics text[];
ALTER TABLE memories ADD COLUMN fact_type text CHECK (fact_type IN ('world', 'experience', 'opinion'));
CREATE INDEX memories_topics ON memories USING gin (topics);

-- Automatic topics of a project. Their centroid is the running mean of their members' embeddings,
-- kept as a sum (pgvector adds vectors) so that servers sharing the database update it with one
-- UPSERT per remembered batch, without reading it first. Fixed topics come from the configuration
-- and are not stored.
CREATE TABLE memlane_topics (
    project      text NOT NULL,
    name         text NOT NULL,
    centroid_sum vector NOT NULL,
    members      integer NOT NULL DEFAULT 0,
    key_terms    text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, name)
);

-- One summary per project and category: key terms and an extract (offline) or an LLM's summary.
-- ``pending`` counts memories added, changed or removed in the category since the last refresh
-- (statement-level triggers below, so every writer marks it: remember, update, forget, import,
-- upkeep); a reader refreshes a summary lazily once enough changed, never on the write path.
CREATE TABLE category_summaries (
    project      text NOT NULL,
    category     text NOT NULL,
    summary      text,
    key_terms    text[] NOT NULL DEFAULT '{}',
    memory_count integer NOT NULL DEFAULT 0,
    updated_at   timestamptz,
    pending      integer NOT NULL DEFAULT 0,
    source       text,                       -- 'extract', or the prompt id of an LLM summary
    PRIMARY KEY (project, category)
);

-- Sorted upserts, so concurrent writers take row locks in one order (as in migration 0002).
CREATE FUNCTION memlane_mark_categories(projects text[], categories text[]) RETURNS void
LANGUAGE sql AS $$
    INSERT INTO category_summaries AS s (project, category, pending)
        SELECT t.project, t.category, count(*)
          FROM unnest(projects, categories) AS t(project, category)
         WHERE t.category IS NOT NULL
         GROUP BY t.project, t.category
         ORDER BY t.project, t.category
    ON CONFLICT (project, category) DO UPDATE SET pending = s.pending + excluded.pending;
$$;

CREATE FUNCTION memlane_categories_on_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memlane_mark_categories(array_agg(project), array_agg(category)) FROM new_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION memlane_categories_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memlane_mark_categories(array_agg(project), array_agg(category)) FROM old_rows;
    RETURN NULL;
END $$;

CREATE FUNCTION memlane_categories_on_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Only rows whose text or category changed (both categories): re-embedding changes nothing.
    PERFORM memlane_mark_categories(array_agg(c.project), array_agg(c.category))
       FROM (SELECT o.project, o.category
               FROM old_rows o JOIN new_rows n ON n.id = o.id
              WHERE o.content IS DISTINCT FROM n.content OR o.category IS DISTINCT FROM n.category
             UNION
             SELECT n.project, n.category
               FROM old_rows o JOIN new_rows n ON n.id = o.id
              WHERE o.content IS DISTINCT FROM n.content OR o.category IS DISTINCT FROM n.category) AS c;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_categories_insert AFTER INSERT ON memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memlane_categories_on_insert();
CREATE TRIGGER memories_categories_delete AFTER DELETE ON memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memlane_categories_on_delete();
CREATE TRIGGER memories_categories_update AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memlane_categories_on_update();

-- Categories that already hold memories get a row to refresh.
INSERT INTO category_summaries (project, category, pending)
    SELECT project, category, count(*) FROM memories WHERE category IS NOT NULL
     GROUP BY project, category ORDER BY project, category;
