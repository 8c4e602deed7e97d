-- Apps behind OAuth (docs/apps.md "OAuth"). Expand only: the previous release never writes the new
-- values and never reads the new tables (docs/operations.md "Upgrades").

-- auth_type `oauth2` and status `needs_authorization`: wider checks, validated in 0003.
ALTER TABLE apps DROP CONSTRAINT apps_auth_type_check;
ALTER TABLE apps ADD CONSTRAINT apps_auth_type_check
  CHECK (auth_type IN ('none', 'bearer', 'header', 'oauth2')) NOT VALID;
ALTER TABLE apps DROP CONSTRAINT apps_status_check;
ALTER TABLE apps ADD CONSTRAINT apps_status_check
  CHECK (status IN ('pending', 'healthy', 'auth_failed', 'unreachable', 'protocol_error', 'needs_authorization')) NOT VALID;

-- The client the tenant gave for an oauth2 app (its secret, if any, is auth_ciphertext), and the
-- scopes it asked for.
ALTER TABLE apps ADD COLUMN oauth_client_id text;
ALTER TABLE apps ADD COLUMN oauth_scope text;

-- An oauth2 app's connection: what discovery found, the client Dynamic Client Registration gave,
-- and the tokens. Secrets only as keyring ciphertexts bound to the tenant and app.
CREATE TABLE app_oauth (
  app_id uuid PRIMARY KEY REFERENCES apps (id) ON DELETE CASCADE,
  tenant_id uuid NOT NULL,
  -- The authorization server (issuer URL) and the RFC 8707 resource of the last authorize.
  authorization_server text,
  resource text,
  -- The SDK's discovery state: protected resource and authorization server metadata (public documents).
  discovery jsonb,
  -- A client registered by Dynamic Client Registration: its id, and the registration (with its
  -- secret) encrypted; null when the tenant gave the client.
  client_id text,
  client_ciphertext text,
  client_key_id text,
  -- The token response (access and refresh tokens), encrypted; null while not connected.
  tokens_ciphertext text,
  tokens_key_id text,
  access_token_expires_at timestamptz,
  -- +1 whenever the tokens change (connect, refresh, forget): a refresh writes its tokens only over
  -- the version it started from, and a replica that waited for another's refresh sees it moved.
  token_version integer NOT NULL DEFAULT 0,
  connected_at timestamptz,
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Consent flows in progress: single-use, 10 minutes; the state itself is kept only as a hash.
CREATE TABLE app_oauth_states (
  state_hash text PRIMARY KEY,
  tenant_id uuid NOT NULL,
  app_id uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  -- The app's target_version when the flow started: a consent for an older URL or client connects nothing.
  target_version integer NOT NULL,
  return_to text NOT NULL,
  redirect_uri text NOT NULL,
  -- The PKCE code verifier, encrypted.
  code_verifier_ciphertext text NOT NULL,
  -- Who started the flow: the connect is audited as them.
  actor_type text NOT NULL,
  actor_id text NOT NULL,
  member_id text,
  expires_at timestamptz NOT NULL,
  consumed_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX app_oauth_states_app ON app_oauth_states (app_id);
