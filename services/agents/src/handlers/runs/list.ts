import { errors, parsePage, timestampCursor, toPage, type CursorCodec } from '@workauto/grpc';
import type { KeysetCursor } from '@workauto/db';
import { AgentRunStatus } from '@workauto/protos/workauto/agents/v1/agents.js';
import * as runs from '../../repo/runs.js';
import { blueprintOf, runStatuses, toRun, type AgentsDeps, type Handler } from '../common.js';

/** The runs list's cursor (docs/api.md §7): the created_at of the last run returned (RFC 3339); the next page is strictly older. */
const RUN_CURSOR: CursorCodec<KeysetCursor> = {
  ...timestampCursor,
  rule: 'must be an RFC 3339 timestamp: next_cursor of the previous page (the created_at of its last run)',
};

export function listAgentRuns({ pool }: AgentsDeps): Handler<'listAgentRuns'> {
  return async (req, ctx) => {
    const b = blueprintOf(req.blueprint);
    const page = parsePage(req, RUN_CURSOR);
    const status = runStatuses.toDomain(req.status) as runs.RunStatus | undefined;
    if (req.status !== AgentRunStatus.AGENT_RUN_STATUS_UNSPECIFIED && status === undefined)
      throw errors.invalidField('status', `must be one of ${runStatuses.names.join(', ')}`);
    return toPage(await runs.listRuns(pool, ctx.tenant, b.id, status, page), toRun, RUN_CURSOR);
  };
}
