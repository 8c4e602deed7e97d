export { createPool, withTransaction, withRetriedTransaction, ensureDatabase, databaseUrlFor, updateTenantRow, type Pool, type PoolClient, type Queryable } from './pool.js';
export { runMigrations } from './migrations.js';
export type { KeysetCursor } from './pagination.js';
export { isUniqueViolation, isForeignKeyViolation, isDatabaseUnavailable } from './errors.js';
export { newId, isUuid } from './ids.js';
