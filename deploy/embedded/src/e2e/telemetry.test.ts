/**
 * Tracing across the deployment shape: every service's process exports OTLP (http/json) to a real
 * collector endpoint on loopback. One API call is one trace from the gateway through gRPC to the
 * service, the event it writes carries that trace in its outbox headers (the Kafka headers), the
 * consumer that applies the event continues it, and no credential appears in any exported span.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { Keyring, generateToken } from '@workauto/crypto';
import { databaseUrlFor } from '@workauto/db';
import { eventually } from '@workauto/testing';
import { startMcpServer } from '@workauto/apps/testing/mcp-servers';
import { FakeProvider } from '@workauto/agents/testing';
import { startServiceProcesses, type ServiceProcesses } from '../processes.js';

interface Span {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  service: string;
}

describe(
  'tracing across processes',
  { skip: process.env.KAFKA_BROKERS ? false : 'KAFKA_BROKERS is not set (make test starts a broker)' },
  () => {
    let cluster: ServiceProcesses;
    let collector: Server;
    let fake: FakeProvider;
    const exported: string[] = [];
    const spans: Span[] = [];
    const adminToken = generateToken('wkadmin_', 40);
    const prefix = `otel_${randomBytes(4).toString('hex')}`;

    before(async () => {
      // The collector: OTLP/HTTP JSON on /v1/traces.
      collector = createServer((req, res) => {
        let body = '';
        req.on('data', (c: Buffer) => (body += c.toString()));
        req.on('end', () => {
          exported.push(body);
          try {
            for (const rs of JSON.parse(body).resourceSpans ?? []) {
              const service =
                rs.resource?.attributes?.find((a: { key: string }) => a.key === 'service.name')?.value?.stringValue ??
                '';
              for (const ss of rs.scopeSpans ?? [])
                for (const s of ss.spans ?? [])
                  spans.push({
                    traceId: s.traceId,
                    spanId: s.spanId,
                    parentSpanId: s.parentSpanId,
                    name: s.name,
                    kind: s.kind,
                    service,
                  });
            }
          } catch {
            // not JSON: kept in `exported` for the secrecy check
          }
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        });
      });
      await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
      fake = await FakeProvider.start();
      const { port } = collector.address() as { port: number };
      cluster = await startServiceProcesses({
        databaseServerUrl: process.env.TEST_DATABASE_URL!,
        databasePrefix: prefix,
        platformAdminToken: adminToken,
        encryptionKeys: Keyring.generateSpec(),
        kafkaBrokers: process.env.KAFKA_BROKERS,
        env: {
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_BSP_SCHEDULE_DELAY: '100',
          OPENAI_BASE_URL: fake.openaiBaseUrl,
          ANTHROPIC_BASE_URL: fake.anthropicBaseUrl,
        },
      });
    });
    after(async () => {
      await cluster?.stop();
      collector?.close();
      await fake?.stop();
    });

    it('follows one request from the gateway into the service and its event, with no credential exported', async () => {
      const call = async (method: string, path: string, key: string, body?: unknown, traceparent?: string) => {
        const res = await fetch(`${cluster.url}/api/v1${path}`, {
          method,
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            ...(traceparent ? { traceparent } : {}),
          },
          body: body ? JSON.stringify(body) : undefined,
        });
        return { status: res.status, body: await res.json() };
      };
      /** A trace of the test's own for one call (W3C traceparent), so that its spans can be found. */
      const newTrace = () => {
        const traceId = randomBytes(16).toString('hex');
        return { traceId, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` };
      };
      /**
       * The sentinel before a "no secret in any span" check: each process a call crossed has exported
       * the call's server span, the last of its spans there to end (a process exports its spans in the
       * order they ended, one batch at a time), so every span of the call is at the collector.
       */
      const exportedEverySpanOf = (traces: { traceId: string }[], services: string[]) =>
        eventually(
          () =>
            `${services.join(' and ')} exported their server spans of the calls: ${JSON.stringify(spans.filter((s) => traces.some((t) => t.traceId === s.traceId)).map((s) => [s.service, s.name, s.kind]))}`,
          () =>
            traces.every(({ traceId }) =>
              services.every((service) =>
                spans.some((s) => s.traceId === traceId && s.service === service && s.kind === 2),
              ),
            ),
          30_000,
          100,
        );
      const tenant = await call('POST', '/admin/tenants', adminToken, {
        name: 'Traced',
        owner: { name: 'Owner', email: 'owner@traced.test' },
      });
      assert.equal(tenant.status, 201);
      const key = tenant.body.api_key as string;
      const note = await call('POST', '/notes', key, { title: 'traced' });
      assert.equal(note.status, 201);

      // The note's event row carries the W3C trace context of the request that wrote it.
      const db = new pg.Client({
        connectionString: databaseUrlFor(process.env.TEST_DATABASE_URL!, `${prefix}_notes_tasks`),
      });
      await db.connect();
      const { rows } = await db.query<{ headers: Record<string, string> }>(
        'SELECT headers FROM outbox WHERE resource_id = $1',
        [note.body.id],
      );
      await db.end();
      const traceparent = rows[0]?.headers.traceparent;
      assert.match(
        traceparent ?? '',
        /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/,
        `outbox headers: ${JSON.stringify(rows[0]?.headers)}`,
      );
      const traceId = traceparent!.split('-')[1]!;

      // Each process exports its spans in its own batches: on a loaded machine that takes seconds.
      let trace: Span[] = [];
      await eventually(
        'the gateway and notes-tasks exported their spans of the call',
        () =>
          (trace = spans.filter((s) => s.traceId === traceId)).some((s) => s.service === 'gateway') &&
          trace.some((s) => s.service === 'notes-tasks' && s.kind === 2),
        30_000,
        100,
      ).catch(() => undefined); // the assertions below say which span is missing
      const services = new Set(trace.map((s) => s.service));
      assert.ok(
        services.has('gateway') && services.has('notes-tasks'),
        `one trace spans gateway and notes-tasks: ${JSON.stringify(trace.map((s) => [s.service, s.name]))}`,
      );
      assert.ok(
        trace.some((s) => s.service === 'notes-tasks' && /CreateNote/.test(s.name)),
        'the gRPC server span of CreateNote is in it',
      );

      // identity's audit consumer continues that trace from the Kafka headers: its span is a child
      // of the span that recorded the event.
      const recordedBy = traceparent!.split('-')[2]!;
      const consumed = await eventually(
        "identity's consumer exported its span",
        () => spans.find((s) => s.traceId === traceId && s.service === 'identity' && s.kind === 5),
        30_000,
        100,
      ).catch(() => undefined); // the assertion below lists the trace's spans
      assert.ok(
        consumed,
        `identity's consumer span is in the trace: ${JSON.stringify(spans.filter((s) => s.traceId === traceId).map((s) => [s.service, s.name, s.kind]))}`,
      );
      assert.equal(
        consumed.parentSpanId,
        recordedBy,
        'the consumer span is a child of the span in the traceparent header',
      );
      assert.match(consumed.name, /^process .*audit/);

      // Provider keys (BYOK) probed and stored: traced like any call, and in no span.
      const providerKey = `sk-${randomBytes(24).toString('hex')}`;
      const refusedKey = `sk-ant-${randomBytes(24).toString('hex')}`;
      fake.probes.set(providerKey, 'ok');
      fake.probes.set(refusedKey, 401);
      const validated = newTrace();
      const stored = newTrace();
      assert.equal(
        (await call('POST', '/agent-configs/validate-key', key, { api_key: refusedKey }, validated.traceparent)).body
          .category,
        'invalid_key',
      );
      assert.equal(
        (await call('PUT', '/agent-configs/task-triage/byok-key', key, { api_key: providerKey }, stored.traceparent))
          .status,
        200,
      );
      await exportedEverySpanOf([validated, stored], ['gateway', 'agents']);
      assert.ok(
        spans.some((s) => s.traceId === stored.traceId && s.service === 'agents' && /PutByokKey/.test(s.name)),
        'the agents service traced PutByokKey',
      );

      // An app's secret travels to its MCP server on a probe and a tool call, and into no span.
      const appSecret = `app-secret-${randomBytes(8).toString('hex')}`;
      const mcp = await startMcpServer({
        transport: 'streamable',
        auth: { header: 'authorization', value: `Bearer ${appSecret}` },
        tools: [{ name: 'echo' }],
      });
      try {
        const created = await call('POST', '/apps', key, {
          slug: 'traced',
          display_name: 'Traced',
          mcp_server_url: mcp.url,
          auth: { type: 'bearer', secret: appSecret },
        });
        assert.equal(created.status, 201, JSON.stringify(created.body) + cluster.output());
        assert.equal((await call('POST', '/apps/traced/probe', key, {})).body.status, 'healthy');
        await call('PATCH', '/apps/traced', key, { enabled_tools: ['echo'] });
        const toolCall = newTrace();
        assert.equal(
          (await call('POST', '/apps/traced/tools/echo/call', key, { arguments: { x: 1 } }, toolCall.traceparent))
            .status,
          200,
        );
        assert.equal(mcp.calls.at(-1)?.headers.authorization, `Bearer ${appSecret}`);
        await exportedEverySpanOf([toolCall], ['gateway', 'apps']);
        assert.ok(
          spans.some((s) => s.traceId === toolCall.traceId && s.service === 'apps' && /CallTool/.test(s.name)),
          'the apps service traced CallTool',
        );
      } finally {
        await mcp.close();
      }

      const all = exported.join('\n');
      assert.ok(all.length > 1000, 'spans were exported');
      assert.ok(!all.includes(appSecret), 'the app secret is in no span');
      assert.ok(!all.includes(providerKey) && !all.includes(refusedKey), 'no provider key is in any span');
      assert.ok(!all.includes(key), 'the API key is in no span');
      assert.ok(!all.includes(adminToken), 'the admin token is in no span');
    });
  },
);
