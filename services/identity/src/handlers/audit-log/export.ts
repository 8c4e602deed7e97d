import { httpBodyChunks, validate } from '@workauto/grpc';
import type { HttpBody } from '@workauto/protos/google/api/httpbody.js';
import { AuditLogExportFormat } from '@workauto/protos/workauto/identity/v1/identity.js';
import { auditEntryJson, csvHeader, csvRow, ndjsonLine, type AuditEntryJson } from '../../domain/audit-export.js';
import * as audit from '../../repo/audit-log.js';
import type { IdentityDeps, Handler } from '../common.js';
import { auditFilter } from './common.js';

/** How each export format starts and writes an entry. */
const EXPORT_FORMATS: Partial<
  Record<
    AuditLogExportFormat,
    { contentType: string; extension: string; head: string; entry: (e: AuditEntryJson) => string }
  >
> = {
  [AuditLogExportFormat.AUDIT_LOG_EXPORT_FORMAT_NDJSON]: {
    contentType: 'application/x-ndjson',
    extension: 'ndjson',
    head: '',
    entry: ndjsonLine,
  },
  [AuditLogExportFormat.AUDIT_LOG_EXPORT_FORMAT_CSV]: {
    contentType: 'text/csv; charset=utf-8',
    extension: 'csv',
    head: csvHeader(),
    entry: csvRow,
  },
};

/**
 * Entries read per query, and text gathered before a chunk is sent (far below gRPC's 4 MiB message
 * limit). Small enough that a batch and a chunk die young: with 500 entries and
 * 128 Ki characters the heap in use was the same, but V8 grew its heap (and identity's RSS) by
 * about 40 MiB more during a 300,000-entry export (docs/identity.md, measurements).
 */
const EXPORT_BATCH = 200;

const CHUNK_BYTES = 64 * 1024;

/**
 * Nothing is sent before the request is checked and the first batch is read, so a bad request
 * or an unreachable database is still a JSON error; after that a failure cuts the stream.
 */
export function exportAuditLog({ pool }: IdentityDeps): Handler<'exportAuditLog'> {
  return async function* (req, ctx): AsyncGenerator<HttpBody> {
    const v = validate();
    const format = EXPORT_FORMATS[req.format];
    if (!format) v.add('format', 'is required: ndjson or csv');
    const filter = auditFilter(req, v);
    v.done();
    const { head, entry, contentType, extension } = format!;
    async function* exportText(): AsyncGenerator<string> {
      yield head;
      for await (const rows of audit.auditLogBatches(pool, ctx.tenant, filter, EXPORT_BATCH))
        for (const row of rows) yield entry(auditEntryJson(row));
    }
    // Chunked per entry, not per batch: a batch of heavy entries would pass the message limit.
    // Saved as a file named for the day (UTC) of the export.
    const filename = `audit-log-${new Date().toISOString().slice(0, 10)}.${extension}`;
    yield* httpBodyChunks(exportText(), contentType, CHUNK_BYTES, {
      content_disposition: `attachment; filename="${filename}"`,
    });
  };
}
