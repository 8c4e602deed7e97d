import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

/**
 * uuid's v7 draws each id's random bytes with its own crypto.getRandomValues call, which was most
 * of an id's cost (≈ 2–7 µs against ≈ 0.1 µs for crypto.randomUUID, which draws from a cache).
 * Ids take theirs from a pool refilled 256 ids at a time, and keep the time and sequence state
 * uuid keeps (its updateV7State, which the package does not export): within a millisecond the
 * sequence counts up, so a process's ids still sort by creation.
 */
const random = new Uint8Array(16 * 256);
let taken = random.length;
const clock = { msecs: -Infinity, seq: 0 };

/** Record ids are UUIDv7: time-ordered, so index inserts stay local and ids sort by creation. */
export function newId(): string {
  if (taken === random.length) {
    randomFillSync(random);
    taken = 0;
  }
  const bytes = random.subarray(taken, (taken += 16));
  const now = Date.now();
  if (now > clock.msecs) {
    clock.msecs = now;
    clock.seq = ((bytes[6]! & 0x7f) << 24) | (bytes[7]! << 16) | (bytes[8]! << 8) | bytes[9]!;
  } else {
    clock.seq = (clock.seq + 1) | 0;
    if (clock.seq === 0) clock.msecs++;
  }
  return v7({ random: bytes, msecs: clock.msecs, seq: clock.seq });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export function isUuid(value: string): boolean {
  return UUID.test(value);
}
