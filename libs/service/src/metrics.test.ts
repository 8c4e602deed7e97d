/**
 * Metrics without a trace collector: a real process with a metrics port serves Prometheus text with
 * the gRPC server's call metrics and the downstream state, and exports nothing else anywhere. The
 * process is what an IPv6-only cluster runs: its gRPC server on ::1 alone, called at [::1]; its
 * metrics on every address (`::`), IPv6 and IPv4.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { eventually, freePort } from '@workauto/testing';

const script = `
  import { startTelemetry } from '@workauto/telemetry';
  startTelemetry('metrics-test', { tracing: false, metricsPort: Number(process.argv[1]), metricsHost: '::' });
  const { GrpcServer, CallerVerifier, Downstream, generateCallerKeys } = await import('@workauto/grpc');
  const { createLogger } = await import('@workauto/logger');
  const { NotesTasksServiceService: S } = await import('@workauto/protos/workauto/notes_tasks/v1/notes_tasks.js');
  const server = new GrpcServer({
    name: 'notes-tasks', errorDomain: 'notes.workauto', logger: createLogger('t', 'silent'), protoFiles: [],
    callerVerifier: new CallerVerifier(generateCallerKeys('k').verifyKeys),
  }).add('workauto.notes_tasks.v1.NotesTasksService', S, { listNotes: async () => ({ data: [], has_more: false }) });
  const port = await server.listen('::1', 0);
  server.markServing();
  // No caller token: refused (UNAUTHENTICATED), and counted.
  const notes = new Downstream('notes_tasks', '[::1]:' + port);
  await notes.call(S.listNotes, {}).catch(() => undefined);
  // Nothing listens there: the service is marked down.
  const nowhere = new Downstream('nowhere', '127.0.0.1:1', { healthTimeoutMs: 200 });
  await nowhere.call(S.listNotes, {}).catch(() => undefined);
  console.log('ready');
  setInterval(() => {}, 1000);
`;

describe('metrics on METRICS_PORT', () => {
  let child: ReturnType<typeof spawn> | undefined;
  after(() => child?.kill('SIGKILL'));

  it('serves rpc.server.call.duration and workauto.downstream.down in Prometheus format over IPv6 and IPv4, with no collector configured', async () => {
    const port = await freePort();
    const env = { PATH: process.env.PATH ?? '' };
    const spawned = spawn(process.execPath, ['--input-type=module', '-e', script, String(port)], {
      env,
      cwd: new URL('..', import.meta.url),
    });
    child = spawned;
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    await eventually('the process says it is ready', () => {
      assert.equal(spawned.exitCode, null, stderr);
      return stdout.includes('ready');
    });
    // The health check that marks the unreachable service down ends on its own, after the call.
    const down = /workauto_downstream_down\{[^}]*service="nowhere"[^}]*\} 1/;
    let text = '';
    await eventually(
      () => `the metrics say the unreachable service is down:\n${text}`,
      async () => down.test((text = await (await fetch(`http://[::1]:${port}/metrics`)).text())),
    );
    assert.equal((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 200, 'metrics answer over IPv4 too');
    assert.match(
      text,
      /rpc_server_call_duration_count\{[^}]*rpc_method="ListNotes"[^}]*rpc_grpc_status_code="16"[^}]*\} 1/,
    );
    assert.match(text, /workauto_downstream_down\{[^}]*service="notes_tasks"[^}]*\} 0/);
    assert.equal(stderr, '', 'no exporter tried to reach a collector');
  });
});
