/**
 * A server's tool listing as the apps service keeps it (docs/apps.md "Tools"): what one complete
 * listing is, and the limits that keep one app's tools a bounded size. Pure.
 */
export interface ListedTool {
  name: string;
  description: string | null;
  input_schema: Record<string, unknown>;
}

export const TOOL_LIMITS = {
  /** tools/list pages followed in one probe (docs/apps.md "Probing"). */
  pages: 64,
  /** Tools kept per app. */
  tools: 1_000,
  /** A tool name, in characters (MCP names are 1–128). */
  name: 128,
  description: 4_000,
  /** A tool's input schema, as JSON bytes. */
  schemaBytes: 16 * 1024,
  /** One listing's tools together (name, description, schema as JSON bytes). */
  listingBytes: 512 * 1024,
  /**
   * An app's stored tools together, stale ones included: the oldest stale tools are dropped beyond
   * it, so an App (a response, an event's data) stays well below the ~1 MB an event may carry.
   */
  storedBytes: 640 * 1024,
};

/** What a tool weighs against the byte limits (the same measure as repo/apps.ts pruneTools). */
function toolBytes(tool: ListedTool): number {
  return (
    Buffer.byteLength(tool.name) +
    Buffer.byteLength(tool.description ?? '') +
    Buffer.byteLength(JSON.stringify(tool.input_schema))
  );
}

export interface Listing {
  tools: ListedTool[];
  /**
   * True when the server's every page was read and every tool kept: only then are tools missing
   * from it marked stale. A listing cut short (64 pages, a repeated cursor, a limit) still adds and
   * refreshes the tools it saw.
   */
  complete: boolean;
}

/** Collects the pages of one listing; `page` returns one page's raw tools and its nextCursor. */
export async function collectListing(
  page: (cursor: string | undefined) => Promise<{
    tools: { name: string; description?: string | undefined; inputSchema: unknown }[];
    nextCursor?: string | undefined;
  }>,
): Promise<Listing> {
  const byName = new Map<string, ListedTool>();
  let complete = true;
  let bytes = 0;
  const cursors = new Set<string>();
  let cursor: string | undefined;
  for (let n = 1; ; n++) {
    const result = await page(cursor);
    for (const raw of result.tools) {
      const tool = keepable(raw);
      const size = tool ? toolBytes(tool) : 0;
      if (
        !tool ||
        byName.has(tool.name) ||
        byName.size >= TOOL_LIMITS.tools ||
        bytes + size > TOOL_LIMITS.listingBytes
      ) {
        if (!tool || !byName.has(tool.name)) complete = false; // a name listed twice keeps its first entry
        continue;
      }
      bytes += size;
      byName.set(tool.name, tool);
    }
    const next = result.nextCursor;
    if (next === undefined || next === '') break;
    if (cursors.has(next) || n >= TOOL_LIMITS.pages) {
      complete = false; // a server that loops or never ends: keep what was read
      break;
    }
    cursors.add(next);
    cursor = next;
  }
  return { tools: [...byName.values()], complete };
}

function keepable(raw: {
  name: string;
  description?: string | undefined;
  inputSchema: unknown;
}): ListedTool | undefined {
  if (typeof raw.name !== 'string' || raw.name.length === 0 || raw.name.length > TOOL_LIMITS.name) return undefined;
  const schema =
    raw.inputSchema && typeof raw.inputSchema === 'object' && !Array.isArray(raw.inputSchema)
      ? (raw.inputSchema as Record<string, unknown>)
      : { type: 'object' };
  if (Buffer.byteLength(JSON.stringify(schema)) > TOOL_LIMITS.schemaBytes) return undefined;
  const description = typeof raw.description === 'string' ? raw.description.slice(0, TOOL_LIMITS.description) : null;
  return { name: raw.name, description, input_schema: schema };
}
