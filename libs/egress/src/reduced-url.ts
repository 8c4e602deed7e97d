/**
 * A tenant's destination URL as callers below admin see it: scheme, host and port, then `/…`.
 * Paths and queries of webhook and MCP URLs often carry tokens.
 */
export function reducedUrl(url: string): string {
  const parsed = URL.parse(url);
  return parsed ? `${parsed.protocol}//${parsed.host}/…` : '…';
}
