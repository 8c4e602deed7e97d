import { EVENT_TYPES } from '@workauto/events';
import type { Handler } from '../common.js';

export function listWebhookEventTypes(): Handler<'listWebhookEventTypes'> {
  return async () => {
    return { data: EVENT_TYPES.map((t) => ({ name: t.name, description: t.description })) };
  };
}
