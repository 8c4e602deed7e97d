-- A config's provider, model and server (base_url) and the prices of a model the table does not
-- know. NULL: the defaults (the stored key's or the blueprint's provider, the blueprint's model, the
-- platform's URL, the price table). base_url is stored with the key it was probed with: a key is
-- only ever sent to the server it was checked against.
ALTER TABLE agent_configs ADD COLUMN provider text CHECK (provider IN ('openai', 'anthropic'));
ALTER TABLE agent_configs ADD COLUMN model text CHECK (char_length(model) BETWEEN 1 AND 128);
ALTER TABLE agent_configs ADD COLUMN base_url text;
ALTER TABLE agent_configs ADD COLUMN input_price_cents_per_mtok double precision CHECK (input_price_cents_per_mtok >= 0);
ALTER TABLE agent_configs ADD COLUMN output_price_cents_per_mtok double precision CHECK (output_price_cents_per_mtok >= 0);
