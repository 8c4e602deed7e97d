import type { Handlers } from '@workauto/grpc';
import type { AppsServiceService } from '@workauto/protos/workauto/apps/v1/apps.js';
import type { AppsDeps } from './common.js';
import { listAgentTools } from './agent-tools/list.js';
import { authorizeAppOAuth } from './apps/authorize-oauth.js';
import { callTool } from './apps/call-tool.js';
import { completeAppOAuth } from './apps/complete-oauth.js';
import { createApp } from './apps/create.js';
import { deleteApp } from './apps/delete.js';
import { disconnectAppOAuth } from './apps/disconnect-oauth.js';
import { getApp } from './apps/get.js';
import { listApps } from './apps/list.js';
import { probeApp } from './apps/probe.js';
import { rotateAppAuth } from './apps/rotate-auth.js';
import { updateApp } from './apps/update.js';

export type { AppsDeps } from './common.js';

/** Every rpc of AppsService, one file per rpc: handlers/<resource>/<verb>.ts. */
export function appsHandlers(deps: AppsDeps): Handlers<typeof AppsServiceService> {
  return {
    createApp: createApp(deps),
    listApps: listApps(deps),
    getApp: getApp(deps),
    updateApp: updateApp(deps),
    deleteApp: deleteApp(deps),
    rotateAppAuth: rotateAppAuth(deps),
    probeApp: probeApp(deps),
    callTool: callTool(deps),
    authorizeAppOAuth: authorizeAppOAuth(deps),
    completeAppOAuth: completeAppOAuth(deps),
    disconnectAppOAuth: disconnectAppOAuth(deps),
    listAgentTools: listAgentTools(deps),
  };
}
