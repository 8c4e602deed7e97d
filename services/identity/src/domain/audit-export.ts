/**
 * The audit log export's file formats (GET /audit-log/export): pure text formatting, no I/O.
 * Both start from the entry in the list's JSON shape (`auditEntryJson`), so an export holds
 * exactly the fields and values `GET /audit-log` shows.
 */
import { timestampToJson } from '@workauto/protos';

/** An audit_log row as the repo reads it. */
export interface AuditEntryRow {
  id: string;
  tenant_id: string;
  action: string;
  actor_id: string;
  actor_type: string;
  resource_type: string | null;
  resource_id: string | null;
  ip_address: string | null;
  user_agent: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  member_id: string | null;
}

/** The fields of an entry in the list's order (AuditLogEntry's field numbers): the CSV's columns. */
export const AUDIT_EXPORT_COLUMNS = [
  'id',
  'tenant_id',
  'action',
  'actor_id',
  'actor_type',
  'created_at',
  'metadata',
  'ip_address',
  'resource_id',
  'resource_type',
  'user_agent',
  'member_id',
] as const;

export type AuditEntryJson = Record<(typeof AUDIT_EXPORT_COLUMNS)[number], unknown>;

/**
 * An entry as GET /audit-log returns it (the gateway's JSON mapping of AuditLogEntry): RFC 3339
 * created_at with microseconds, metadata as a JSON object, absent optional fields as null. Written
 * out rather than mapped through the protobuf message: an export maps every entry, and a Struct
 * round trip per entry costs more than reading it.
 */
export function auditEntryJson(row: AuditEntryRow): AuditEntryJson {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    action: row.action,
    actor_id: row.actor_id,
    actor_type: row.actor_type,
    created_at: timestampToJson(row.created_at),
    metadata: row.metadata,
    ip_address: row.ip_address ?? null,
    resource_id: row.resource_id ?? null,
    resource_type: row.resource_type ?? null,
    user_agent: row.user_agent ?? null,
    member_id: row.member_id ?? null,
  };
}

/** NDJSON: the entry as one line of JSON (JSON.stringify escapes every line break inside values). */
export function ndjsonLine(entry: AuditEntryJson): string {
  return `${JSON.stringify(entry)}\n`;
}

/** The CSV's first row: the column names. */
export function csvHeader(): string {
  return `${AUDIT_EXPORT_COLUMNS.join(',')}\r\n`;
}

/** One CSV row (RFC 4180: CRLF line ends, a field with a comma, quote or line break quoted). */
export function csvRow(entry: AuditEntryJson): string {
  return `${AUDIT_EXPORT_COLUMNS.map((c) => csvField(entry[c])).join(',')}\r\n`;
}

// A spreadsheet runs a cell that starts with one of these as a formula (OWASP "CSV injection").
const FORMULA_START = /^[=+\-@\t\r]/;

/**
 * One cell: null is empty, objects (metadata) are their JSON text. A text that a spreadsheet would
 * run as a formula gets a leading `'`: user_agent is whatever the caller's client sent, and an
 * admin opening the export must not run it. NDJSON carries every value unchanged.
 */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  let text = typeof value === 'string' ? value : JSON.stringify(value);
  if (FORMULA_START.test(text)) text = `'${text}`;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
