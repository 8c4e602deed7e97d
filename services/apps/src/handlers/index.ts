import type { Handlers } from '@workauto/grpc';
import type { AppsServiceService } from '@workauto/protos/workauto/apps/v1/apps.js';
import { callTool } from './apps/call-tool.js';
import { createApp } from './apps/create.js';
import { deleteApp } from './apps/delete.js';
import { authorizeAppOAuth, completeAppOAuth, disconnectAppOAuth } from './apps/oauth.js';
import { probeApp } from './apps/probe.js';
import { getApp, listAgentTools, listApps } from './apps/reads.js';
import { rotateAppAuth } from './apps/rotate-auth.js';
import { updateApp } from './apps/update.js';
import type { AppsDeps } from './common.js';

export type { AppsDeps } from './common.js';

/** Every rpc of AppsService: one resource, one file per rpc or concern in apps/. */
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
