-- The member who acted (docs/identity.md, "Audit log"): the member itself, or the member whose API
-- key was used (actor_id stays the key's id), so "what did this member do?" is one filter. Expand
-- only: nullable, no default, so the previous release's consumer keeps inserting without it (its
-- entries and earlier ones have none).
ALTER TABLE audit_log ADD COLUMN member_id uuid;
