/**
 * Mentions in a note body: `[[<entity_type>:<uuid>]]` or `[[<entity_type>:<uuid>|label]]`, outside
 * code. Code is a fenced block (``` or ~~~, CommonMark rules: up to 3 spaces of indent, closed by
 * a fence of the same character at least as long, or the end of the body) or a code span (a run
 * of n backticks up to the next run of exactly n, not across a blank line; a backslash escapes a
 * backtick). Indented code blocks are not recognised (they are ambiguous with list continuations).
 */

const ENTITY_TYPES = ['contact', 'task', 'event', 'deal', 'note', 'member'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

export interface Mention {
  type: EntityType;
  /** Lowercase UUID. */
  id: string;
  label: string | undefined;
  start: number;
  end: number;
}

const MENTION =
  /\[\[([a-z]+):([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:\|([^\]\n]*))?\]\]/g;
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})(.*)$/;
const BLANK_LINE = /\n[ \t]*\n/;

function isEntityType(value: string): value is EntityType {
  return (ENTITY_TYPES as readonly string[]).includes(value);
}

/** [start, end) ranges of the body that are code. */
export function codeRanges(body: string): [number, number][] {
  const ranges: [number, number][] = [];
  let textStart = 0;
  let offset = 0;
  let fence: { char: string; length: number; start: number } | undefined;
  const lines = body.split('\n');
  for (const line of lines) {
    const lineEnd = offset + line.length;
    const clean = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (fence) {
      const close = /^ {0,3}(`{3,}|~{3,})[ \t]*$/.exec(clean);
      if (close && close[1]![0] === fence.char && close[1]!.length >= fence.length) {
        ranges.push([fence.start, lineEnd]);
        fence = undefined;
        textStart = lineEnd + 1;
      }
    } else {
      const open = FENCE_OPEN.exec(clean);
      // A backtick fence's info string cannot hold a backtick (it would be a code span).
      if (open && !(open[1]![0] === '`' && open[2]!.includes('`'))) {
        spansIn(body, textStart, offset, ranges);
        fence = { char: open[1]![0]!, length: open[1]!.length, start: offset };
      }
    }
    offset = lineEnd + 1;
  }
  if (fence) ranges.push([fence.start, body.length]);
  else spansIn(body, textStart, body.length, ranges);
  return ranges.sort((a, b) => a[0] - b[0]);
}

/** Code spans of body[from, to), appended to `out`. */
function spansIn(body: string, from: number, to: number, out: [number, number][]): void {
  let i = from;
  while (i < to) {
    const c = body[i];
    if (c === '\\') {
      i += 2; // an escaped character (an escaped backtick opens nothing)
      continue;
    }
    if (c !== '`') {
      i++;
      continue;
    }
    let n = 0;
    while (i + n < to && body[i + n] === '`') n++;
    const close = closingRun(body, i + n, to, n);
    if (close === undefined) {
      i += n; // no closer: the backticks are text
    } else {
      out.push([i, close + n]);
      i = close + n;
    }
  }
}

/** Start of the next run of exactly n backticks in body[from, to) before a blank line. */
function closingRun(body: string, from: number, to: number, n: number): number | undefined {
  const blank = BLANK_LINE.exec(body.slice(from, to));
  const limit = blank ? from + blank.index : to;
  let j = from;
  while (j < limit) {
    if (body[j] !== '`') {
      j++;
      continue;
    }
    let m = 0;
    while (j + m < limit && body[j + m] === '`') m++;
    if (m === n) return j;
    j += m;
  }
  return undefined;
}

/** Every mention outside code, in order (unknown entity types are plain text). */
export function findMentions(body: string): Mention[] {
  const code = codeRanges(body);
  const found: Mention[] = [];
  for (const m of body.matchAll(MENTION)) {
    const type = m[1]!;
    if (!isEntityType(type)) continue;
    const start = m.index;
    const end = start + m[0].length;
    if (code.some(([a, b]) => start < b && end > a)) continue;
    found.push({ type, id: m[2]!.toLowerCase(), label: m[3], start, end });
  }
  return found;
}

/** The distinct (type, id) pairs a body mentions: the note's rows in the backlink index. */
export function mentionTargets(body: string): { type: EntityType; id: string }[] {
  const seen = new Map<string, { type: EntityType; id: string }>();
  for (const m of findMentions(body)) seen.set(`${m.type}:${m.id}`, { type: m.type, id: m.id });
  return [...seen.values()];
}
