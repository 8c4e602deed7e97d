/**
 * The catalogue of domain event types (GET /webhook-event-types): one file per service, combined
 * here. docs/events.md lists the same types (a test keeps the two equal). A new service adds its
 * file and one line below.
 */
import { APPS_EVENT_TYPES } from './apps.js';
import { calendarEventTypes } from './calendar.js';
import { CRM_PIPELINES_EVENT_TYPES } from './crm-pipelines.js';
import { IDENTITY_EVENT_TYPES } from './identity.js';
import { NOTES_TASKS_EVENT_TYPES } from './notes-tasks.js';
import type { EventType } from './types.js';
import { WEBHOOKS_EVENT_TYPES } from './webhooks.js';

export type { EventType } from './types.js';

export const EVENT_TYPES: readonly EventType[] = [
  ...IDENTITY_EVENT_TYPES,
  ...NOTES_TASKS_EVENT_TYPES,
  ...CRM_PIPELINES_EVENT_TYPES,
  ...WEBHOOKS_EVENT_TYPES,
  ...APPS_EVENT_TYPES,
  ...calendarEventTypes,
];
