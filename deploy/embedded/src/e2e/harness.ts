import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Keyring, generateToken } from '@workauto/crypto';
import { Writable } from 'node:stream';
import { setLogTarget } from '@workauto/logger';
import { databaseUrlFor } from '@workauto/db';
import { generateCallerKeys, mergeVerifyKeys } from '@workauto/grpc';
import { testCallerKeys } from '@workauto/testing';
import { createClient, type ErrorBody, type WorkautoClient } from '@workauto/client';
import { startStack, type Stack, type StackOptions } from '../stack.js';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface TenantFixture {
  id: string;
  ownerId: string;
  /** The owner's API key. */
  key: string;
}

export interface TestStack extends Stack {
  adminToken: string;
  /** One HTTP call to the gateway; body objects are sent as JSON, strings as they are. */
  api<T = any>(
    method: string,
    path: string,
    opts?: { key?: string; body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse<T>>;
  /**
   * The typed client (@workauto/client, generated from the OpenAPI document) acting with `key`:
   * workflow tests call the API through it, so a document that no longer fits them fails tsc.
   */
  client(key?: string): WorkautoClient;
  /** A new tenant through the platform bootstrap endpoint. */
  createTenant(name?: string): Promise<TenantFixture>;
  /** postgres://… of one service's database (to check what is stored, never to set up state). */
  databaseUrl(service: string): string;
}

/**
 * The whole product on loopback for an end-to-end test file: fresh databases on the test run's
 * PostgreSQL (TEST_DATABASE_URL), a fresh admin token, real HTTP through the gateway.
 */
// Log lines stay out of the test runner's output (tests still tap them to check for secrets);
// set LOG_LEVEL to see them.
if (!process.env.LOG_LEVEL) setLogTarget(new Writable({ write: (_chunk, _enc, done) => done() }));

/**
 * The gateway's caller keys, with the services also trusting the test process's signer: a test
 * calls a service straight over gRPC (a TestClient) beside the gateway, as another service would.
 */
function gatewayKeysTrustingTests() {
  const gateway = generateCallerKeys('gateway');
  return { ...gateway, verifyKeys: mergeVerifyKeys(gateway.verifyKeys, testCallerKeys.verifyKeys) };
}

/**
 * The gateway's downstream deadline in e2e stacks (production: 5 s, DOWNSTREAM_DEADLINE_MS); a
 * test's own extra gateway on a stack's services takes it too.
 */
export const E2E_DEADLINE_MS = 30_000;

export async function startTestStack(overrides: Partial<StackOptions> = {}): Promise<TestStack> {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) throw new Error('TEST_DATABASE_URL is not set: run the tests with `make test`, which starts PostgreSQL');
  const adminToken = generateToken('wkadmin_', 40);
  const run = `e2e_${randomBytes(4).toString('hex')}`;
  const stack = await startStack({
    databaseServerUrl: server,
    databasePrefix: run,
    // The real broker when the test run has one (make test starts it); each stack in its own namespace.
    kafkaBrokers: process.env.KAFKA_BROKERS,
    kafkaNamespace: `${run}.`,
    platformAdminToken: adminToken,
    encryptionKeys: Keyring.generateSpec(),
    callerKeys: gatewayKeysTrustingTests(),
    ...overrides,
    // These stacks test what the API answers, not how fast a shared 2-core machine does: with a second
    // `make test` beside this one, a call waits seconds for a core, past the production 5 s deadline.
    // Tests of the deadline itself give theirs (gateway.test's hung service, the fault cluster).
    // Nor do they test the pace of a tenant's heavy writes (a second's worth of its budget at once:
    // two recurring series), which their fixtures outrun by creating dozens at once: a budget ten
    // times the default's. tenant-capacity and noisy-neighbour test the pace with budgets of theirs.
    gatewayOptions: { deadlineMs: E2E_DEADLINE_MS, tenantRateLimitPerMinute: 60_000, ...overrides.gatewayOptions },
  });
  const api: TestStack['api'] = async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.authorization = `Bearer ${opts.key}`;
    let body: string | undefined;
    if (opts.body !== undefined) {
      body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(`${stack.url}${path}`, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: res.status, headers: res.headers, body: parsed as any };
  };
  const createTenant = async (name = 'Acme') => {
    const res = await api('POST', '/api/v1/admin/tenants', {
      key: adminToken,
      body: { name, owner: { name: `${name} Owner`, email: `owner-${randomBytes(3).toString('hex')}@example.com` } },
    });
    if (res.status !== 201) throw new Error(`tenant bootstrap failed: ${res.status} ${JSON.stringify(res.body)}`);
    return { id: res.body.tenant.id, ownerId: res.body.member.id, key: res.body.api_key };
  };
  const databaseUrl = (service: string) => databaseUrlFor(server, `${run}_${service}`);
  const client = (key?: string) => createClient({ baseUrl: stack.url, ...(key ? { apiKey: key } : {}) });
  return { ...stack, adminToken, api, client, createTenant, databaseUrl };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
export type Kind = 'uuid' | 'string' | 'integer' | 'number' | 'boolean' | 'object' | 'array' | 'date-time';

/** Every always-present field of a record is there with its type (docs/api.md §4 wire forms). */
export function assertRecord(value: any, fields: Record<string, Kind>, what: string): void {
  assert.equal(typeof value, 'object', `${what} is an object`);
  for (const [field, kind] of Object.entries(fields)) {
    const v = value[field];
    const ok =
      kind === 'uuid'
        ? typeof v === 'string' && UUID.test(v)
        : kind === 'date-time'
          ? typeof v === 'string' && TIMESTAMP.test(v)
          : kind === 'integer'
            ? Number.isInteger(v)
            : kind === 'number'
              ? typeof v === 'number' && Number.isFinite(v)
              : kind === 'array'
                ? Array.isArray(v)
                : kind === 'object'
                  ? typeof v === 'object' && v !== null && !Array.isArray(v)
                  : typeof v === kind;
    assert.ok(ok, `${what}.${field} should be ${kind}, got ${JSON.stringify(v)}`);
  }
}

/** The error shape of docs/api.md §5: code, status, message, ErrorInfo (with `reason` when given), request id. */
export function assertError(res: ApiResponse, status: number, reason?: string): void {
  assert.equal(res.status, status, JSON.stringify(res.body));
  const e = res.body?.error;
  assert.ok(e, `no error object in ${JSON.stringify(res.body)}`);
  assert.equal(e.code, status);
  assert.equal(typeof e.status, 'string');
  assert.equal(typeof e.message, 'string');
  assert.equal(e.details[0]['@type'], 'type.googleapis.com/google.rpc.ErrorInfo');
  assert.equal(typeof e.details[0].reason, 'string');
  if (reason) assert.equal(e.details[0].reason, reason);
  assert.equal(e.request_id, res.headers.get('x-request-id'));
}

/** What a typed client call answers (openapi-fetch): data on success, the API's error body (docs/api.md §5) otherwise. */
type Answer<T> = { data?: T; error?: unknown; response: Response };

/** The data of a typed client call that must succeed with `status` (the error body is the message otherwise). */
export async function ok<T>(call: Promise<Answer<T>>, status = 200): Promise<Exclude<T, undefined>> {
  const { data, error, response } = await call;
  assert.equal(response.status, status, JSON.stringify(error ?? data));
  return data as Exclude<T, undefined>;
}

/** A typed client call that must fail with `status` (and `reason`) in the API's error shape (docs/api.md §5). */
export async function fails(call: Promise<Answer<unknown>>, status: number, reason?: string): Promise<ApiResponse> {
  const { error, response } = await call;
  const res = { status: response.status, headers: response.headers, body: error };
  assertError(res, status, reason);
  return res;
}

/**
 * A typed client call's answer in the shape `api()` gives (status, headers, and the data or the error
 * body), for a test that judges several possible outcomes of one call.
 */
export async function answer(call: Promise<Answer<unknown>>): Promise<ApiResponse> {
  const { data, error, response } = await call;
  return { status: response.status, headers: response.headers, body: error ?? data };
}

/** The ErrorInfo reason of a typed client call's error body (docs/api.md §5), e.g. NOTE_NOT_FOUND. */
export function reasonOf(error: unknown): string | undefined {
  const details = (error as ErrorBody | undefined)?.error.details ?? [];
  return details.find((d) => 'reason' in d)?.reason;
}

/** The fields named by a 400's BadRequest detail. */
export function violations(res: ApiResponse): string[] {
  const bad = res.body?.error?.details?.find((d: { '@type': string }) => d['@type'].endsWith('BadRequest'));
  return (bad?.field_violations ?? []).map((v: { field: string }) => v.field);
}
