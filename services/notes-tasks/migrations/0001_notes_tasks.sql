-- notes-tasks: notes with tags and backlinks (mentions), tasks with subtasks, order and recurrence.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE notes (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL,
  title       text NOT NULL DEFAULT '',
  body        text NOT NULL DEFAULT '',
  is_archived boolean NOT NULL DEFAULT false,
  is_pinned   boolean NOT NULL DEFAULT false,
  metadata    jsonb NOT NULL DEFAULT '{}',
  notebook_id uuid,
  source_url  text,
  -- Computed from the body on every write (domain/words.ts).
  word_count  integer NOT NULL DEFAULT 0,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);
CREATE INDEX notes_tenant_page ON notes (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
-- The list's text query (ILIKE '%q%') on title and body.
CREATE INDEX notes_title_trgm ON notes USING gin (title gin_trgm_ops) WHERE deleted_at IS NULL;
CREATE INDEX notes_body_trgm ON notes USING gin (body gin_trgm_ops) WHERE deleted_at IS NULL;

CREATE TABLE tags (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL,
  name        text NOT NULL,
  -- The name as compared: NFC, lowercased (Unicode rules, done by the service).
  name_key    text NOT NULL,
  color       text,
  description text,
  metadata    jsonb NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
-- One tag per name and tenant, whatever the case: concurrent attaches of one new name create it once.
CREATE UNIQUE INDEX tags_name_key ON tags (tenant_id, name_key);
CREATE INDEX tags_tenant_page ON tags (tenant_id, created_at DESC, id DESC);

CREATE TABLE note_tags (
  tenant_id  uuid NOT NULL,
  note_id    uuid NOT NULL REFERENCES notes (id),
  tag_id     uuid NOT NULL REFERENCES tags (id),
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (note_id, tag_id)
);
CREATE INDEX note_tags_by_tag ON note_tags (tag_id);

-- The backlink index: what each live note's body mentions, rebuilt in the transaction of every
-- note write and removed with the note.
CREATE TABLE note_links (
  tenant_id   uuid NOT NULL,
  note_id     uuid NOT NULL REFERENCES notes (id),
  entity_type text NOT NULL CHECK (entity_type IN ('contact', 'task', 'event', 'deal', 'note', 'member')),
  entity_id   uuid NOT NULL,
  PRIMARY KEY (note_id, entity_type, entity_id)
);
CREATE INDEX note_links_target ON note_links (tenant_id, entity_type, entity_id);

CREATE TABLE tasks (
  id                 uuid PRIMARY KEY,
  tenant_id          uuid NOT NULL,
  parent_id          uuid,
  title              text NOT NULL,
  description        text,
  -- 1-based, dense among the live tasks of the same parent (or the tenant's top-level tasks).
  position           integer NOT NULL CHECK (position >= 1),
  priority           text NOT NULL DEFAULT 'none' CHECK (priority IN ('none', 'low', 'medium', 'high', 'urgent')),
  assignee_id        uuid,
  creator_id         uuid,
  project_id         uuid,
  section_id         uuid,
  status_id          uuid,
  due_at             timestamptz,
  due_date           date,
  deadline           date,
  start_date         date,
  rrule              text,
  -- DTSTART of the rrule: the due when the rule or the due last changed (internal).
  rrule_anchor       timestamptz,
  next_occurrence    timestamptz,
  estimation_minutes integer CHECK (estimation_minutes >= 0),
  time_spent_minutes integer CHECK (time_spent_minutes >= 0),
  external_id        text,
  identifier         text,
  snoozed_until      timestamptz,
  completed_at       timestamptz,
  canceled_at        timestamptz,
  metadata           jsonb NOT NULL DEFAULT '{}',
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  deleted_at         timestamptz,
  UNIQUE (tenant_id, id),
  -- A parent is a task of the same tenant.
  FOREIGN KEY (tenant_id, parent_id) REFERENCES tasks (tenant_id, id),
  CHECK (parent_id IS DISTINCT FROM id),
  -- Backstop of the dense-order rule: no two live siblings share a position at commit (moves
  -- renumber several rows in one transaction, hence deferred).
  CONSTRAINT tasks_unique_position EXCLUDE USING btree (
    tenant_id WITH =,
    (coalesce(parent_id, '00000000-0000-0000-0000-000000000000'::uuid)) WITH =,
    position WITH =
  ) WHERE (deleted_at IS NULL) DEFERRABLE INITIALLY DEFERRED
);
CREATE INDEX tasks_tenant_page ON tasks (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX tasks_children ON tasks (tenant_id, parent_id, position) WHERE deleted_at IS NULL;
