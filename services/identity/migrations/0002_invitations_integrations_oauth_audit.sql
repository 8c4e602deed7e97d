CREATE TABLE invitations (
  id              uuid PRIMARY KEY,
  tenant_id       uuid NOT NULL REFERENCES tenants (id),
  email           text NOT NULL,
  name            text,
  role            text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
  -- [{domain, access_level, resource_filter}] applied to the member on claim.
  access_policies jsonb NOT NULL DEFAULT '[]',
  -- SHA-256 of the code: the code is shown once, at creation.
  code_hash       text NOT NULL UNIQUE,
  expires_at      timestamptz NOT NULL,
  claimed_at      timestamptz,
  revoked_at      timestamptz,
  member_id       uuid REFERENCES members (id),
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX invitations_tenant_page ON invitations (tenant_id, created_at DESC, id DESC);

-- A tenant's credential per provider, encrypted with the keyring (envelope AES-256-GCM).
CREATE TABLE integration_keys (
  id               uuid PRIMARY KEY,
  tenant_id        uuid NOT NULL REFERENCES tenants (id),
  provider         text NOT NULL,
  ciphertext       text NOT NULL,
  -- Keyring key id that wrapped the data key, and the number of times the credential was replaced.
  key_id           text NOT NULL,
  key_version      integer NOT NULL DEFAULT 1,
  key_hint         text,
  label            text,
  status           text NOT NULL DEFAULT 'active',
  metadata         jsonb NOT NULL DEFAULT '{}',
  last_verified_at timestamptz,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  UNIQUE (tenant_id, provider)
);
CREATE INDEX integration_keys_tenant_page ON integration_keys (tenant_id, created_at DESC, id DESC);

-- Pending OAuth consent flows: single-use, 10 minutes.
CREATE TABLE oauth_states (
  state_hash           text PRIMARY KEY,
  tenant_id            uuid NOT NULL REFERENCES tenants (id),
  idp                  text NOT NULL,
  connection_id        uuid NOT NULL,
  return_to            text NOT NULL,
  code_verifier_cipher text NOT NULL,
  nonce                text,
  actor_type           text NOT NULL,
  actor_id             text NOT NULL,
  expires_at           timestamptz NOT NULL,
  consumed_at          timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now()
);

-- What happened, from the audit stream of every service; id is the event id (idempotent insert).
CREATE TABLE audit_log (
  id            uuid PRIMARY KEY,
  tenant_id     uuid NOT NULL,
  action        text NOT NULL,
  actor_id      text NOT NULL,
  actor_type    text NOT NULL,
  resource_type text,
  resource_id   text,
  ip_address    text,
  user_agent    text,
  metadata      jsonb NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL
);
CREATE INDEX audit_log_page ON audit_log (tenant_id, created_at DESC, id DESC);
CREATE INDEX audit_log_by_action ON audit_log (tenant_id, action, created_at DESC, id DESC);
CREATE INDEX audit_log_by_resource_type ON audit_log (tenant_id, resource_type, created_at DESC, id DESC);
