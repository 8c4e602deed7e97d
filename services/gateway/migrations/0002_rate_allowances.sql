-- Rate limits shared by the gateway replicas (docs/decisions.md, "Rate limits across gateway
-- replicas"): what the replicas together took of each key's limit (a credential, a tenant, a client
-- address) in each minute. Rows live two minutes. UNLOGGED: a count matters for its minute only, and
-- a crash of PostgreSQL, which empties the table, gives every key a fresh minute.
CREATE UNLOGGED TABLE IF NOT EXISTS rate_allowances (
  window_minute bigint NOT NULL, -- minutes since 1970-01-01 UTC
  key           text   NOT NULL,
  taken         bigint NOT NULL,
  PRIMARY KEY (window_minute, key)
);
