import type { EventType } from './types.js';

/** Events of the crm-pipelines service (docs/events.md § crm-pipelines). */
export const CRM_PIPELINES_EVENT_TYPES: readonly EventType[] = [
  { name: 'pipeline.created', description: 'A pipeline was created: POST /pipelines (data includes its stages)' },
  {
    name: 'pipeline.updated',
    description:
      'A pipeline was updated: PATCH /pipelines/{id}; also the pipeline that loses the default flag to another, and the one promoted when the default is deleted',
  },
  { name: 'pipeline.deleted', description: 'A pipeline was deleted: DELETE /pipelines/{id} (soft)' },
  { name: 'pipeline_stage.created', description: 'A pipeline stage was created: POST /pipelines/{id}/stages' },
  {
    name: 'pipeline_stage.updated',
    description: 'A pipeline stage was updated: PATCH /pipelines/{id}/stages/{stage_id} (rename, retype, reorder)',
  },
  {
    name: 'pipeline_stage.deleted',
    description: 'A pipeline stage was deleted: DELETE /pipelines/{id}/stages/{stage_id} (soft)',
  },
  { name: 'deal.created', description: 'A deal was created: POST /deals' },
  {
    name: 'deal.updated',
    description: 'A deal was updated: PATCH /deals/{id} changing anything but the stage (or nothing)',
  },
  {
    name: 'deal.stage_changed',
    description:
      'A deal moved to another stage: a deal moves to another stage (PATCH stage_id or pipeline_id; a stage delete that moves its deals: one per deal)',
  },
  { name: 'deal.deleted', description: 'A deal was deleted: DELETE /deals/{id} (soft)' },
  { name: 'contact.created', description: 'A contact was created: POST /contacts' },
  { name: 'contact.updated', description: 'A contact was updated: PATCH /contacts/{id}' },
  {
    name: 'contact.deleted',
    description: 'A contact was deleted: DELETE /contacts/{id} (soft; its channels get contact_channel.deleted)',
  },
  { name: 'contact_channel.created', description: 'A contact channel was created: POST /contacts/{id}/channels' },
  {
    name: 'contact_channel.updated',
    description:
      'A contact channel was updated: PATCH …/channels/{channel_id}; also a primary demoted by a new primary, and the channel promoted when the primary is deleted',
  },
  {
    name: 'contact_channel.deleted',
    description: "A contact channel was deleted: DELETE …/channels/{channel_id}, or its contact's deletion",
  },
];
