import { findMentions } from './mentions.js';

const segmenter = new Intl.Segmenter('und', { granularity: 'word' });

/**
 * Words of a note body: Unicode word segmentation (UAX #29, so CJK text counts too), counting
 * word-like segments; punctuation and markdown markers are not words. A mention counts as the
 * words of its label (none without one), not as its markup.
 */
export function wordCount(body: string): number {
  let text = '';
  let at = 0;
  for (const m of findMentions(body)) {
    text += `${body.slice(at, m.start)} ${m.label ?? ''} `;
    at = m.end;
  }
  text += body.slice(at);
  let n = 0;
  for (const s of segmenter.segment(text)) if (s.isWordLike) n++;
  return n;
}
