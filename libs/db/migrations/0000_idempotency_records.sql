-- Idempotency-Key records of a service's writes (docs/api.md, Idempotency), shared by every
-- service's database: a keyed call's first transaction records the key, so a retry after any
-- outcome (a 504, a reset connection, a gateway that died) finds it and gets the first response
-- instead of writing again. `response` is the rpc's response sealed with a key only the gateways
-- derive (it may hold a one-time secret); NULL until known. Rows are deleted after 24 h.
CREATE TABLE IF NOT EXISTS idempotency_records (
  scope       text        NOT NULL, -- the caller: tenant, actor type and id
  key         text        NOT NULL, -- the client's Idempotency-Key
  fingerprint text        NOT NULL, -- SHA-256 of the rpc and its request
  response    text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (scope, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_created_at ON idempotency_records (created_at);
