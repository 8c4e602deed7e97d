-- The revocation epoch (docs/identity.md, "The gateway's authentication cache"): one counter that
-- every change which may take a grant away bumps in its own transaction, whatever made it (an rpc,
-- a job, an operator's SQL). Gateways read it to know when to forget the credentials they cached;
-- the bump commits with the change, so no gateway or identity replica dying mid-way can lose it.
CREATE TABLE revocation_epoch (
  id    boolean PRIMARY KEY DEFAULT true CHECK (id),
  epoch bigint NOT NULL
);
INSERT INTO revocation_epoch (id, epoch) VALUES (true, 1);

CREATE FUNCTION bump_revocation_epoch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE revocation_epoch SET epoch = epoch + 1;
  RETURN NULL;
END;
$$;

-- A key revoked (or un-revoked, moved, deleted).
CREATE TRIGGER api_keys_revocation_epoch
  AFTER UPDATE ON api_keys FOR EACH ROW
  WHEN (OLD.revoked_at IS DISTINCT FROM NEW.revoked_at OR OLD.member_id IS DISTINCT FROM NEW.member_id
        OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id OR OLD.key_hash IS DISTINCT FROM NEW.key_hash)
  EXECUTE FUNCTION bump_revocation_epoch();
CREATE TRIGGER api_keys_deleted_revocation_epoch
  AFTER DELETE ON api_keys FOR EACH STATEMENT EXECUTE FUNCTION bump_revocation_epoch();

-- A member deactivated, or its role changed (a rename or a new email changes no grant).
CREATE TRIGGER members_revocation_epoch
  AFTER UPDATE ON members FOR EACH ROW
  WHEN (OLD.role IS DISTINCT FROM NEW.role OR OLD.is_active IS DISTINCT FROM NEW.is_active
        OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
  EXECUTE FUNCTION bump_revocation_epoch();
CREATE TRIGGER members_deleted_revocation_epoch
  AFTER DELETE ON members FOR EACH STATEMENT EXECUTE FUNCTION bump_revocation_epoch();

-- Any access policy written or removed (one may lower a level below the role's default).
CREATE TRIGGER access_policies_revocation_epoch
  AFTER INSERT OR UPDATE OR DELETE ON access_policies FOR EACH STATEMENT EXECUTE FUNCTION bump_revocation_epoch();
