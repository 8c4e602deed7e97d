export {
  createPool,
  preparedStatement,
  shapedStatement,
  withTransaction,
  ensureDatabase,
  databaseUrlFor,
  updateTenantRow,
  checkColumns,
  type Columns,
  type TransactionOptions,
  type Pool,
  type PoolClient,
  type Queryable,
} from './pool.js';
export {
  runMigrations,
  pendingMigrations,
  listMigrations,
  MigrationError,
  MigrationLockTimeoutError,
  type MigrationFile,
  type MigrationLogger,
  type MigrationOptions,
} from './migrations.js';
export {
  listPage,
  newestFirst,
  encodeCursor,
  decodeCursor,
  type KeysetCursor,
  type KeysetOrder,
  type KeysetPage,
  type ListQuery,
  type PageQuery,
} from './pagination.js';
export {
  isUniqueViolation,
  isForeignKeyViolation,
  isDatabaseUnavailable,
  isConcurrencyFailure,
  isLockNotAvailable,
} from './errors.js';
export { newId, isUuid } from './ids.js';
export { runForTenant, iterateForTenant, TenantShareBusyError, type TenantScopeOptions } from './tenant-share.js';
export {
  IDEMPOTENCY_MIGRATIONS,
  runKeyed,
  deleteExpiredIdempotencyRecords,
  IdempotencyKeyReusedError,
  IdempotencyKeyInUseError,
  type KeyedWrite,
  type KeyedOutcome,
} from './idempotency.js';
