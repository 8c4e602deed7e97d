/**
 * Tools of the tenant's apps (MCP servers registered with the apps service): the enabled tools of
 * its healthy apps, offered to the model as `<slug>__<tool>` and called through the apps service's
 * CallTool as the run's agent.
 */
import type { CallContext } from '@workauto/grpc';
import { AppsServiceService as Apps } from '@workauto/protos/workauto/apps/v1/apps.js';
import type { ToolAccess } from '../domain/blueprints.js';
import type { ToolSpec } from '../providers/index.js';
import type { ToolClients } from './clients.js';

export interface AppTool {
  spec: ToolSpec;
  slug: string;
  tool: string;
}

/** Tool names every provider accepts (OpenAI: ^[a-zA-Z0-9_-]{1,64}$); other names are not offered. */
const PROVIDER_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

/** Calling an app's tool needs write on apps, as POST /apps/{slug}/tools/{name}/call does. */
export const APP_TOOL_ACCESS: ToolAccess = { domain: 'apps', level: 'write' };

const appToolName = (slug: string, tool: string) => `${slug}__${tool}`;

/** The apps' tools a run may offer; none when the apps service is not configured. */
export async function listAppTools(clients: ToolClients, ctx: CallContext): Promise<AppTool[]> {
  if (!clients.has('apps')) return [];
  const res = await clients.call('apps', Apps.listAgentTools, {}, ctx);
  return res.tools.flatMap((t) => {
    const name = appToolName(t.app_slug, t.name);
    if (!PROVIDER_TOOL_NAME.test(name)) return [];
    return [
      {
        slug: t.app_slug,
        tool: t.name,
        spec: {
          name,
          description: t.description || `${t.name} of the app ${t.app_slug}`,
          inputSchema: t.input_schema ?? { type: 'object' },
        },
      },
    ];
  });
}

/** Calls an app's tool; the result as text for the model (structured content when the tool gave it). */
export async function callAppTool(
  clients: ToolClients,
  tool: AppTool,
  args: Record<string, unknown>,
  ctx: CallContext,
): Promise<{ content: string; isError: boolean }> {
  const res = await clients.call('apps', Apps.callTool, { slug: tool.slug, name: tool.tool, arguments: args }, ctx);
  const content =
    res.structured_content ??
    res.content.map((c) => (c.type === 'text' && typeof c.text === 'string' ? { type: 'text', text: c.text } : c));
  return { content: JSON.stringify(content), isError: res.is_error };
}
