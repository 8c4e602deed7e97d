import type { Handlers } from '@workauto/grpc';
import type { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import type { CrmDeps } from './common.js';
import { contactHandlers } from './contacts.js';
import { dealHandlers } from './deals.js';
import { pipelineHandlers } from './pipelines.js';

export type { CrmDeps } from './common.js';

/** Every rpc of CrmPipelinesService; each area's handlers live in the file of its name. */
export function crmHandlers(deps: CrmDeps): Handlers<typeof CrmPipelinesServiceService> {
  return {
    ...pipelineHandlers(deps),
    ...dealHandlers(deps),
    ...contactHandlers(deps),
  };
}
