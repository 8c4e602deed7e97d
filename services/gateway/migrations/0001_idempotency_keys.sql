-- Idempotency-Key records (contract §1): the first response to a POST, replayed to a retry with the
-- same key by the same credential for 24 h. The response is keyring ciphertext (it may hold a
-- one-time secret); NULL while the first request is still running.
CREATE TABLE idempotency_keys (
  scope        text        NOT NULL, -- SHA-256 of the credential, or 'anonymous'
  key          text        NOT NULL,
  fingerprint  text        NOT NULL, -- SHA-256 of route and request message
  response     text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  locked_until timestamptz NOT NULL,
  PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
