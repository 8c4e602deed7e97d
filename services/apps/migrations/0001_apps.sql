-- Apps: a tenant's MCP servers, their encrypted credential, probe state and discovered tools.
CREATE TABLE apps (
  id uuid PRIMARY KEY,
  tenant_id uuid NOT NULL,
  slug text NOT NULL,
  display_name text NOT NULL,
  description text,
  mcp_server_url text NOT NULL,
  auth_type text NOT NULL CHECK (auth_type IN ('none', 'bearer', 'header')),
  auth_header_name text,
  -- Keyring ciphertext (libs/crypto) of the secret, bound to the tenant and app; never returned.
  auth_ciphertext text,
  -- The ENCRYPTION_KEYS key id that wrapped it (for re-encryption after a key rotation).
  auth_key_id text,
  auth_hint text,
  -- 0 without a secret; +1 on every rotation (spec rule 7).
  key_version integer NOT NULL DEFAULT 0,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'healthy', 'auth_failed', 'unreachable', 'protocol_error')),
  status_reason text,
  consecutive_probe_failures integer NOT NULL DEFAULT 0,
  last_probed_at timestamptz,
  last_healthy_at timestamptz,
  enabled_tools text[] NOT NULL DEFAULT '{}',
  metadata jsonb NOT NULL DEFAULT '{}',
  -- +1 whenever what a probe talks to changes (URL, credential): a probe that started before
  -- writes nothing, so a result for the old URL or secret never lands on the new one.
  target_version integer NOT NULL DEFAULT 1,
  -- Scheduled probes: due at next_probe_at; a replica that claims one holds it until probe_lease_until.
  next_probe_at timestamptz NOT NULL DEFAULT now(),
  probe_lease_until timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX apps_tenant_slug ON apps (tenant_id, slug);
CREATE INDEX apps_tenant_created ON apps (tenant_id, created_at DESC, id DESC);
CREATE INDEX apps_next_probe ON apps (next_probe_at);

CREATE TABLE app_tools (
  app_id uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  tenant_id uuid NOT NULL,
  name text NOT NULL,
  description text,
  input_schema jsonb NOT NULL DEFAULT '{}',
  first_seen_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  stale boolean NOT NULL DEFAULT false,
  PRIMARY KEY (app_id, name)
);
