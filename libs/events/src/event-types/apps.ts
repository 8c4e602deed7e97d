import type { EventType } from './types.js';

/** Events of the apps service (docs/events.md § apps). */
export const APPS_EVENT_TYPES: readonly EventType[] = [
  { name: 'app.created', description: 'An app (MCP server) was created: POST /apps' },
  {
    name: 'app.updated',
    description: 'An app was updated: PATCH /apps/{slug} (display name, description, URL, enabled tools, metadata)',
  },
  {
    name: 'app.auth_rotated',
    description: "An app's stored credential was replaced: POST /apps/{slug}/auth/rotate (never the secret)",
  },
  {
    name: 'app.status_changed',
    description: "A probe changed an app's status (pending, healthy, auth_failed, unreachable, protocol_error)",
  },
  { name: 'app.deleted', description: 'An app was deleted: DELETE /apps/{slug}' },
  {
    name: 'app.authorization_started',
    description: "An admin started an OAuth app's consent: POST /apps/{slug}/oauth/authorize (never a token)",
  },
  {
    name: 'app.connected',
    description: "An OAuth app's consent completed and its tokens were stored (the callback; never a token)",
  },
  {
    name: 'app.disconnected',
    description:
      "An OAuth app's tokens were revoked (RFC 7009, where the server offers it) and forgotten: DELETE /apps/{slug}/oauth",
  },
  {
    name: 'app.authorization_required',
    description:
      'An OAuth app needs an admin to connect it again: its authorization server refused to refresh its access token',
  },
  {
    name: 'app.tool_called',
    description:
      "An app's tool was called (POST /apps/{slug}/tools/{name}/call, or by an agent run): tool, outcome, duration; never the arguments or the result",
  },
];
