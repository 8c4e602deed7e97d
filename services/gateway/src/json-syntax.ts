/**
 * Where a request body stops being JSON, for the 400 that says so (docs/api.md §5): the line,
 * column and position (0-based, in characters) of the first character JSON.parse refuses, and what
 * was wrong there, from JSON.parse's own message without the quoted text.
 */

/** What a body JSON.parse refused is told: `unexpected token 'a' at line 2, column 10 (position 25)`. */
export function jsonSyntaxDescription(text: string, parseMessage: string): string {
  const position = positionOf(text, parseMessage);
  const before = text.slice(0, position);
  const line = before.split('\n').length;
  const column = position - before.lastIndexOf('\n');
  const where = `line ${line}, column ${column} (position ${position})`;
  if (position >= text.length) return `ends early at ${where}: a value, a closing bracket or a quote is missing`;
  const what = parseMessage
    .replace(/, .* is not valid JSON$/s, '')
    .replace(/ in JSON at position \d+.*$/s, '')
    .replace(/^./, (c) => c.toLowerCase());
  return `${what} at ${where}`;
}

/**
 * The position JSON.parse names (V8 writes it for most errors, not for an unexpected token): else
 * the shortest prefix that fails other than by ending early ends at it (O(log n) parses, only for a
 * body already refused).
 */
function positionOf(text: string, message: string): number {
  const named = /at position (\d+)/.exec(message);
  if (named) return Number(named[1]);
  if (/Unexpected end of JSON input/.test(message)) return text.length;
  let lo = 1;
  let hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (failsBeforeEnd(text.slice(0, mid))) hi = mid;
    else lo = mid + 1;
  }
  return lo - 1;
}

function failsBeforeEnd(prefix: string): boolean {
  try {
    JSON.parse(prefix);
    return false;
  } catch (err) {
    const message = (err as Error).message;
    if (/Unexpected end of JSON input/.test(message)) return false;
    const at = /at position (\d+)/.exec(message);
    return !at || Number(at[1]) < prefix.length;
  }
}
