/**
 * What a run's step keeps of a tool's arguments and result, or of the model's text. Pure.
 *
 * A step is read by anyone with read on agents, for as long as the run is kept, so it holds less
 * than the run saw: texts are cut to STEP_TEXT_MAX_BYTES, and the provider key the run used is
 * blanked out wherever it appears (a model can be talked into repeating what it was given, and a
 * tool can echo what it was sent; the key is never given to either, this is the second line). App
 * secrets never reach the agents service (the apps service sends them to the MCP server only), and
 * the caller identity a tool call carries travels in gRPC metadata, never in arguments or results.
 */

import { blankSecrets } from '@workauto/crypto';

/** Bytes of UTF-8 a step's result (or text, or oversized arguments) keeps: 4 KiB. */
export const STEP_TEXT_MAX_BYTES = 4_096;

/** The text with every secret blanked out (secrets shorter than 8 characters are not keys and are left alone). */
export function redact(text: string, secrets: readonly string[]): string {
  return blankSecrets(
    text,
    secrets.filter((s) => s.length >= 8),
  );
}

/** The text cut to at most `maxBytes` bytes of UTF-8, never inside a character. */
export function cutUtf8(text: string, maxBytes = STEP_TEXT_MAX_BYTES): string {
  if (Buffer.byteLength(text) <= maxBytes) return text;
  const bytes = Buffer.from(text).subarray(0, maxBytes);
  // A cut inside a multi-byte character leaves a partial sequence: decoding turns it into U+FFFD, dropped here.
  return bytes.toString('utf8').replace(/\uFFFD+$/, '');
}

/** A step's text: secrets blanked out, then cut. */
export function stepText(text: string, secrets: readonly string[]): string {
  return cutUtf8(redact(text, secrets));
}

/**
 * A tool call's arguments as the step shows them: the object, secrets blanked out; when its JSON is
 * larger than STEP_TEXT_MAX_BYTES, that JSON cut to the limit as a string (a cut object would not
 * be JSON).
 */
export function stepArguments(args: Record<string, unknown>, secrets: readonly string[]): unknown {
  const text = redact(JSON.stringify(args), secrets);
  if (Buffer.byteLength(text) > STEP_TEXT_MAX_BYTES) return cutUtf8(text);
  return JSON.parse(text) as unknown;
}
