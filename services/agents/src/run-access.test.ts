/**
 * A run acts within its starter's access: starting one needs, beside write on agents (the route's
 * policy, checked by the gateway), the level each of the blueprint's tools needs in its domain, and
 * app tools are offered only to runs whose starter may call them (write on apps). Over real gRPC
 * with caller identities signed with access levels, as the gateway signs them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import type { AccessLevels } from '@workauto/grpc';
import { startMcpServer, type McpTestServer } from '@workauto/apps/testing/mcp-servers';
import { eventually } from '@workauto/testing';
import { AgentRunStatus, Provider } from '@workauto/protos/workauto/agents/v1/agents.js';
import { S, failure, newKey, startRunStack, tenant, withAccess } from './test-support.js';
import { scheduleDueRuns } from './worker/scheduler.js';

/** What every blueprint needs of a member who starts it, by its tools. */
const NEEDS: Record<string, AccessLevels> = {
  'task-triage': { tasks: 'write', notes: 'read' },
  'pipeline-review': { crm: 'read', notes: 'write', tasks: 'write' },
  'daily-briefing': { calendar: 'read', tasks: 'read', crm: 'read', notes: 'write' },
};

describe('who may start a run', () => {
  let stack: Awaited<ReturnType<typeof startRunStack>>;
  let mcp: McpTestServer;
  before(async () => {
    mcp = await startMcpServer({ transport: 'streamable', tools: [{ name: 'lookup' }] });
    stack = await startRunStack({ apps: { toolCallTimeoutMs: 5_000 } });
  });
  after(async () => {
    await stack?.stop();
    await mcp?.close();
  });

  it('refuses a member with agents write but crm none a pipeline-review run: 403 naming crm, no run', async () => {
    const t = tenant();
    const member = withAccess(t, { ...NEEDS['pipeline-review'], agents: 'write', crm: 'none' });
    const f = await failure(
      stack.client.call(S.createAgentRun, { blueprint: 'pipeline-review', input: 'review' }, member),
    );
    assert.equal(f.code, grpc.status.PERMISSION_DENIED);
    assert.equal(f.reason, 'ACCESS_DENIED');
    assert.deepEqual(f.metadata, { domain: 'crm', required_level: 'read', actual_level: 'none' });
    assert.match(f.message, /pipeline-review run needs read access to crm; your access there is none/);
    const { rows } = await stack.db.query(`SELECT count(*)::int AS n FROM agent_runs WHERE tenant_id = $1`, [t.id]);
    assert.equal(rows[0].n, 0, 'no run, no job');
  });

  it("needs each domain of the blueprint's tools at the level its tools need: read to list, write to create", async () => {
    for (const [blueprint, needs] of Object.entries(NEEDS)) {
      const t = tenant();
      const enough = withAccess(t, { ...needs, agents: 'write' });
      const run = await stack.client.call(
        S.createAgentRun,
        { blueprint, input: 'x', run_at: new Date(Date.now() + 3_600_000) },
        enough,
      );
      assert.equal(run.status, AgentRunStatus.AGENT_RUN_STATUS_QUEUED, blueprint);
      for (const [domain, level] of Object.entries(needs)) {
        const below = level === 'write' ? 'read' : 'none';
        const f = await failure(
          stack.client.call(S.createAgentRun, { blueprint, input: 'x' }, withAccess(t, { ...needs, [domain]: below })),
        );
        assert.equal(f.code, grpc.status.PERMISSION_DENIED, `${blueprint} with ${domain} ${below}`);
        assert.deepEqual(f.metadata, { domain, required_level: level, actual_level: below });
      }
    }
  });

  /** Runs task-triage for a caller and returns the tool names the model was offered. */
  async function offeredTo(t: ReturnType<typeof tenant>, caller: Parameters<typeof withAccess>[1] | 'schedule') {
    const k = newKey('openai');
    stack.fake.script(k, [{ text: 'done' }]);
    await stack.client.call(
      S.putByokKey,
      { blueprint: 'task-triage', api_key: k, provider: Provider.PROVIDER_OPENAI },
      t.call,
    );
    if (caller === 'schedule') {
      await stack.client.call(S.putAgentConfig, { blueprint: 'task-triage', schedule: '@yearly' }, t.call);
      await stack.db.query(
        `UPDATE agent_configs SET schedule_next_at = now() - interval '1 second' WHERE tenant_id = $1`,
        [t.id],
      );
      await scheduleDueRuns(stack.db);
    } else {
      await stack.client.call(S.createAgentRun, { blueprint: 'task-triage', input: 'go' }, withAccess(t, caller));
    }
    await eventually('the run asks the model', () => stack.fake.chats(k).length > 0, 10_000);
    return JSON.parse(stack.fake.chats(k)[0]!.body).tools.map((x: { function: { name: string } }) => x.function.name);
  }

  it('offers app tools only to runs whose starter may call them (write on apps); scheduled runs act under the config', async () => {
    const t = tenant();
    await stack.addApp(t.call, 'crm-app', mcp.url, ['lookup']);
    const base = { ...NEEDS['task-triage'], agents: 'write' } as const;
    assert.deepEqual(await offeredTo(t, { ...base, apps: 'read' }), ['list_tasks', 'create_task', 'search_notes']);
    assert.deepEqual(await offeredTo(t, { ...base, apps: 'write' }), [
      'list_tasks',
      'create_task',
      'search_notes',
      'crm-app__lookup',
    ]);
    assert.deepEqual(await offeredTo(t, 'schedule'), ['list_tasks', 'create_task', 'search_notes', 'crm-app__lookup']);
  });
});
