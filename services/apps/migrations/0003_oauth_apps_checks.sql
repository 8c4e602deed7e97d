-- The wider checks of 0002, validated apart from adding them (docs/operations.md "Upgrades").
ALTER TABLE apps VALIDATE CONSTRAINT apps_auth_type_check;
ALTER TABLE apps VALIDATE CONSTRAINT apps_status_check;
