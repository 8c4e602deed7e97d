-- CRM: pipelines with ordered stages, deals with their stage history, contacts with channels.
-- Money is NUMERIC (exact decimals), never floating point; confidences are NUMERIC fractions 0..1.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE pipelines (
  id            uuid PRIMARY KEY,
  tenant_id     uuid NOT NULL,
  name          text NOT NULL,
  description   text,
  currency      text NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
  display_order integer NOT NULL,
  is_default    boolean NOT NULL DEFAULT false,
  metadata      jsonb NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  deleted_at    timestamptz
);
-- At most one live default per tenant (the handlers keep exactly one while any pipeline exists).
CREATE UNIQUE INDEX pipelines_one_default ON pipelines (tenant_id) WHERE is_default AND deleted_at IS NULL;
CREATE INDEX pipelines_tenant_page ON pipelines (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;

CREATE TABLE pipeline_stages (
  id                 uuid PRIMARY KEY,
  tenant_id          uuid NOT NULL,
  pipeline_id        uuid NOT NULL REFERENCES pipelines (id),
  name               text NOT NULL,
  stage_type         text NOT NULL CHECK (stage_type IN ('open', 'won', 'lost')),
  default_confidence numeric(5, 4) CHECK (default_confidence >= 0 AND default_confidence <= 1),
  -- 1-based, dense among the pipeline's live stages (renumbered in the transaction of a move).
  display_order      integer NOT NULL,
  metadata           jsonb NOT NULL DEFAULT '{}',
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  -- Stages are soft-deleted: history rows and deleted deals still name them.
  deleted_at         timestamptz,
  -- Target of the deals' (stage_id, pipeline_id) foreign key: a deal's stage is in the deal's pipeline.
  UNIQUE (id, pipeline_id)
);
CREATE INDEX pipeline_stages_order ON pipeline_stages (pipeline_id, display_order) WHERE deleted_at IS NULL;

CREATE TABLE contacts (
  id         uuid PRIMARY KEY,
  tenant_id  uuid NOT NULL,
  name       text NOT NULL,
  company    text,
  job_title  text,
  metadata   jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  deleted_at timestamptz
);
CREATE INDEX contacts_tenant_page ON contacts (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
-- The list's text query (ILIKE '%q%') on name and company.
CREATE INDEX contacts_name_trgm ON contacts USING gin (name gin_trgm_ops) WHERE deleted_at IS NULL;
CREATE INDEX contacts_company_trgm ON contacts USING gin (company gin_trgm_ops) WHERE deleted_at IS NULL;

CREATE TABLE contact_channels (
  id               uuid PRIMARY KEY,
  tenant_id        uuid NOT NULL,
  contact_id       uuid NOT NULL REFERENCES contacts (id),
  type             text NOT NULL CHECK (type IN ('email', 'phone', 'url', 'linkedin', 'other')),
  value            text NOT NULL,
  canonical_value  text NOT NULL,
  -- Version of the canonicalisation rules that produced canonical_value.
  key_version      integer NOT NULL,
  label            text,
  is_primary       boolean NOT NULL DEFAULT false,
  is_verified      boolean NOT NULL DEFAULT false,
  -- 1-based, dense among the contact's live channels of the type.
  preference_order integer NOT NULL,
  metadata         jsonb NOT NULL DEFAULT '{}',
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  deleted_at       timestamptz
);
-- One live channel per (tenant, type, canonical value): 409 on a duplicate.
CREATE UNIQUE INDEX contact_channels_canonical ON contact_channels (tenant_id, type, canonical_value) WHERE deleted_at IS NULL;
-- At most one primary per (contact, type).
CREATE UNIQUE INDEX contact_channels_one_primary ON contact_channels (contact_id, type) WHERE is_primary AND deleted_at IS NULL;
CREATE INDEX contact_channels_by_contact ON contact_channels (contact_id, type, preference_order) WHERE deleted_at IS NULL;
CREATE INDEX contact_channels_value_trgm ON contact_channels USING gin (value gin_trgm_ops) WHERE deleted_at IS NULL;
CREATE INDEX contact_channels_canonical_trgm ON contact_channels USING gin (canonical_value gin_trgm_ops) WHERE deleted_at IS NULL;

CREATE TABLE deals (
  id                  uuid PRIMARY KEY,
  tenant_id           uuid NOT NULL,
  pipeline_id         uuid NOT NULL REFERENCES pipelines (id),
  stage_id            uuid NOT NULL,
  title               text NOT NULL,
  -- Exact decimal; the handlers allow only the currency's minor-unit decimals (2 for USD).
  amount              numeric(19, 4) NOT NULL DEFAULT 0 CHECK (amount >= 0),
  currency            text NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
  confidence          numeric(5, 4) CHECK (confidence >= 0 AND confidence <= 1),
  contact_id          uuid REFERENCES contacts (id),
  -- A member of identity's database: not a foreign key across services.
  owner_id            uuid,
  expected_close_date date,
  metadata            jsonb NOT NULL DEFAULT '{}',
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now(),
  deleted_at          timestamptz,
  FOREIGN KEY (stage_id, pipeline_id) REFERENCES pipeline_stages (id, pipeline_id)
);
-- The summary's one aggregation reads only this index (index-only scan): live deals of a
-- pipeline grouped by stage, with the two columns it sums.
CREATE INDEX deals_summary ON deals (tenant_id, pipeline_id, stage_id) INCLUDE (amount, confidence) WHERE deleted_at IS NULL;
-- Keyset pages, newest first, unfiltered and per filter.
CREATE INDEX deals_tenant_page ON deals (tenant_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX deals_pipeline_page ON deals (tenant_id, pipeline_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX deals_stage_page ON deals (tenant_id, stage_id, created_at DESC, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX deals_owner_page ON deals (tenant_id, owner_id, created_at DESC, id DESC) WHERE deleted_at IS NULL AND owner_id IS NOT NULL;
CREATE INDEX deals_contact_page ON deals (tenant_id, contact_id, created_at DESC, id DESC) WHERE deleted_at IS NULL AND contact_id IS NOT NULL;

-- One row per stage change (and one for the creation, without a from-stage). Names are copied, so
-- the history reads the same after a stage is renamed or deleted.
CREATE TABLE deal_stage_history (
  id                   uuid PRIMARY KEY,
  tenant_id            uuid NOT NULL,
  deal_id              uuid NOT NULL REFERENCES deals (id),
  -- 1, 2, … per deal, taken under the deal's row lock: the order of the changes, whatever the clocks say.
  seq                  integer NOT NULL,
  from_stage_id        uuid,
  from_stage_name      text,
  to_stage_id          uuid NOT NULL,
  to_stage_name        text NOT NULL,
  amount_at_change     numeric(19, 4),
  confidence_at_change numeric(5, 4),
  changed_at           timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (deal_id, seq)
);
