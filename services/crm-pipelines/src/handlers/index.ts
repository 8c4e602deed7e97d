import type { Handlers } from '@workauto/grpc';
import type { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import type { CrmDeps } from './common.js';
import { contactHandlers } from './contacts.js';
import { dealHandlers } from './deals.js';
import { createPipeline } from './pipelines/create.js';
import { deletePipeline } from './pipelines/delete.js';
import { deletePipelineStage } from './pipelines/delete-stage.js';
import { getPipeline, listPipelines } from './pipelines/reads.js';
import { createPipelineStage, updatePipelineStage } from './pipelines/stages.js';
import { getPipelineSummary } from './pipelines/summary.js';
import { updatePipeline } from './pipelines/update.js';

export type { CrmDeps } from './common.js';

/** Every rpc of CrmPipelinesService: pipelines/ (one file per rpc or concern), deals.ts, contacts.ts. */
export function crmHandlers(deps: CrmDeps): Handlers<typeof CrmPipelinesServiceService> {
  return {
    createPipeline: createPipeline(deps),
    listPipelines: listPipelines(deps),
    getPipeline: getPipeline(deps),
    updatePipeline: updatePipeline(deps),
    deletePipeline: deletePipeline(deps),
    getPipelineSummary: getPipelineSummary(deps),
    createPipelineStage: createPipelineStage(deps),
    updatePipelineStage: updatePipelineStage(deps),
    deletePipelineStage: deletePipelineStage(deps),
    ...dealHandlers(deps),
    ...contactHandlers(deps),
  };
}
