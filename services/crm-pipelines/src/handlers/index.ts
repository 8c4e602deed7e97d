import type { Handlers } from '@workauto/grpc';
import type { CrmPipelinesServiceService } from '@workauto/protos/workauto/crm_pipelines/v1/crm_pipelines.js';
import type { CrmDeps } from './common.js';
import { createContactChannel } from './contacts/create-channel.js';
import { createContact } from './contacts/create.js';
import { deleteContactChannel } from './contacts/delete-channel.js';
import { deleteContact } from './contacts/delete.js';
import { getContact } from './contacts/get.js';
import { listContactChannels } from './contacts/list-channels.js';
import { listContacts } from './contacts/list.js';
import { updateContactChannel } from './contacts/update-channel.js';
import { updateContact } from './contacts/update.js';
import { createDeal } from './deals/create.js';
import { deleteDeal } from './deals/delete.js';
import { getDeal } from './deals/get.js';
import { listDealHistory } from './deals/list-history.js';
import { listDeals } from './deals/list.js';
import { updateDeal } from './deals/update.js';
import { createPipelineStage } from './pipelines/create-stage.js';
import { createPipeline } from './pipelines/create.js';
import { deletePipelineStage } from './pipelines/delete-stage.js';
import { deletePipeline } from './pipelines/delete.js';
import { getPipelineSummary } from './pipelines/get-summary.js';
import { getPipeline } from './pipelines/get.js';
import { listPipelines } from './pipelines/list.js';
import { updatePipelineStage } from './pipelines/update-stage.js';
import { updatePipeline } from './pipelines/update.js';

export type { CrmDeps } from './common.js';

/** Every rpc of CrmPipelinesService, one file per rpc: handlers/<resource>/<verb>.ts. */
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
    createDeal: createDeal(deps),
    listDeals: listDeals(deps),
    getDeal: getDeal(deps),
    updateDeal: updateDeal(deps),
    deleteDeal: deleteDeal(deps),
    listDealHistory: listDealHistory(deps),
    createContact: createContact(deps),
    listContacts: listContacts(deps),
    getContact: getContact(deps),
    updateContact: updateContact(deps),
    deleteContact: deleteContact(deps),
    createContactChannel: createContactChannel(deps),
    listContactChannels: listContactChannels(deps),
    updateContactChannel: updateContactChannel(deps),
    deleteContactChannel: deleteContactChannel(deps),
  };
}
