/**
 * App probe latency (not a test): POST /api/v1/apps/{slug}/probe through the whole stack (gateway →
 * apps → a real MCP session over Streamable HTTP through the egress policy → the result written in
 * PostgreSQL), against an MCP server of the official SDK on loopback with 10 tools on 2 pages, and
 * the bare MCP session alone (the SDK client, initialize + tools/list), 200 probes each, one at a time.
 *
 *   make build && WORKAUTO_KAFKA=off node deploy/embedded/dist/with-infra.js -- node scripts/bench-apps-probe.mjs
 *
 * Env: PROBES (200).
 */
import { EgressPolicy } from '../libs/egress/dist/index.js';
import { listServerTools, probeOutcome } from '../services/apps/dist/mcp/operations.js';
import { startMcpServer } from '../services/apps/dist/testing/mcp-servers.js';
import { startBenchStack, summarize } from './lib-bench.mjs';

const PROBES = Number(process.env.PROBES ?? 200);
const server = await startMcpServer({
  transport: 'streamable',
  auth: { header: 'authorization', value: 'Bearer bench-secret-123' },
  pageSize: 5,
  tools: Array.from({ length: 10 }, (_, i) => ({
    name: `tool_${i}`,
    description: `Tool ${i}`,
    inputSchema: { properties: { q: { type: 'string' } } },
  })),
});
const { stack, api, createTenant } = await startBenchStack();
const egress = new EgressPolicy({ allowPrivate: true });
try {
  const tenant = await createTenant();
  const key = tenant.api_key;
  await api('POST', '/api/v1/apps', key, {
    slug: 'bench',
    display_name: 'Bench',
    mcp_server_url: server.url,
    auth: { type: 'bearer', secret: 'bench-secret-123' },
  });

  const session = [];
  for (let i = 0; i < PROBES; i++) {
    const t0 = performance.now();
    const outcome = await probeOutcome(
      listServerTools({
        url: server.url,
        headers: { Authorization: 'Bearer bench-secret-123' },
        egress,
        timeoutMs: 10_000,
        secrets: [],
      }),
    );
    session.push(performance.now() - t0);
    if (!outcome.ok || outcome.listing.tools.length !== 10) throw new Error(`probe failed: ${JSON.stringify(outcome)}`);
  }
  const full = [];
  for (let i = 0; i < PROBES; i++) {
    const t0 = performance.now();
    const app = await api('POST', '/api/v1/apps/bench/probe', key, {});
    full.push(performance.now() - t0);
    if (app.status !== 'healthy') throw new Error(`probe: ${JSON.stringify(app)}`);
  }
  console.log(`MCP session alone (initialize + 2 tools/list pages), ${PROBES} probes: ${summarize(session)}`);
  console.log(`POST /apps/{slug}/probe through the gateway, ${PROBES} probes:        ${summarize(full)}`);
} finally {
  await egress.close();
  await stack.stop();
  await server.close();
}
