import type { Handlers } from '@workauto/grpc';
import type { AppsServiceService } from '@workauto/protos/workauto/apps/v1/apps.js';
import { appHandlers } from './apps.js';
import type { AppsDeps } from './common.js';

export type { AppsDeps } from './common.js';

/** Every rpc of AppsService (one resource: apps.ts). */
export function appsHandlers(deps: AppsDeps): Handlers<typeof AppsServiceService> {
  return appHandlers(deps);
}
