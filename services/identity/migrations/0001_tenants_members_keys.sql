CREATE TABLE tenants (
  id         uuid PRIMARY KEY,
  name       text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE members (
  id         uuid PRIMARY KEY,
  tenant_id  uuid NOT NULL REFERENCES tenants (id),
  name       text NOT NULL,
  email      text,
  role       text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  is_active  boolean NOT NULL DEFAULT true,
  contact_id uuid,
  metadata   jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- One member per email within a tenant (409 on a duplicate).
CREATE UNIQUE INDEX members_tenant_email ON members (tenant_id, lower(email)) WHERE email IS NOT NULL;
-- Keyset pagination, newest first.
CREATE INDEX members_tenant_page ON members (tenant_id, created_at DESC, id DESC);

CREATE TABLE api_keys (
  id           uuid PRIMARY KEY,
  tenant_id    uuid NOT NULL REFERENCES tenants (id),
  member_id    uuid NOT NULL REFERENCES members (id),
  name         text NOT NULL,
  -- SHA-256 of the key: the key itself is shown once and never stored.
  key_hash     text NOT NULL UNIQUE,
  key_hint     text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX api_keys_tenant_page ON api_keys (tenant_id, created_at DESC, id DESC);

-- Per-member overrides of the role's default access level in one domain (contract §4).
CREATE TABLE access_policies (
  tenant_id       uuid NOT NULL REFERENCES tenants (id),
  member_id       uuid NOT NULL REFERENCES members (id),
  domain          text NOT NULL,
  access_level    text NOT NULL CHECK (access_level IN ('none', 'read', 'write', 'admin')),
  resource_filter jsonb NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (member_id, domain)
);
