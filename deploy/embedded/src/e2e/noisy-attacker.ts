/**
 * One attacker of the noisy-neighbour test (noisy-neighbour.test.ts), run in a worker thread so that
 * its requests are made on an event loop of their own: the test's main thread times tenant B, and
 * an attacker's JavaScript (hundreds of sockets, 64 loops) must not add to B's measured latency.
 * It runs `workerData` (an AttackSpec) until the main thread posts 'stop', then posts the statuses
 * it got, by status (0: no answer, e.g. a connection cut).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import { stalledRequest } from '@workauto/testing';

export type AttackSpec =
  /** `count` requests that read nothing after their answer's first bytes. */
  | { kind: 'stalled'; url: string; headers?: Record<string, string>; count: number }
  /** `loops` clients requesting in a loop; `slowly`: each reads its answer a chunk every 50 ms. */
  | {
      kind: 'loop';
      url: string;
      loops: number;
      method?: string;
      headers?: Record<string, string>;
      body?: string;
      slowly?: boolean;
    }
  /** `count` requests held open at once, each read as it comes (event streams). */
  | { kind: 'open'; url: string; headers?: Record<string, string>; count: number };

const spec = workerData as AttackSpec;
const statuses: number[] = [];
const gone = new AbortController();
let stopping = false;

async function loop(s: Extract<AttackSpec, { kind: 'loop' }>): Promise<void> {
  while (!stopping) {
    try {
      const res = await fetch(s.url, {
        method: s.method ?? 'GET',
        headers: s.headers ?? {},
        ...(s.body === undefined ? {} : { body: s.body }),
        signal: gone.signal,
      });
      statuses.push(res.status);
      if (!s.slowly) await res.arrayBuffer();
      else {
        const reader = res.body!.getReader();
        while (!(await reader.read()).done) await sleep(50);
      }
    } catch {
      if (!stopping) statuses.push(0);
    }
  }
}

async function stalled(s: Extract<AttackSpec, { kind: 'stalled' }>): Promise<() => void> {
  const held = Array.from({ length: s.count }, () => stalledRequest(s.url, s.headers));
  for (const r of held) void r.status.then((status) => statuses.push(status));
  return () => {
    for (const r of held) r.close();
  };
}

async function open(s: Extract<AttackSpec, { kind: 'open' }>): Promise<void> {
  await Promise.allSettled(
    Array.from({ length: s.count }, async () => {
      const res = await fetch(s.url, { headers: s.headers ?? {}, signal: gone.signal });
      statuses.push(res.status);
      await res.arrayBuffer();
    }),
  );
}

const running: Promise<unknown>[] = [];
let closeStalled: (() => void) | undefined;
if (spec.kind === 'loop') for (let i = 0; i < spec.loops; i++) running.push(loop(spec));
else if (spec.kind === 'open') running.push(open(spec));
else closeStalled = await stalled(spec);

parentPort!.once('message', async () => {
  stopping = true;
  gone.abort();
  closeStalled?.();
  await Promise.allSettled(running);
  const tally: Record<number, number> = {};
  for (const s of statuses) tally[s] = (tally[s] ?? 0) + 1;
  parentPort!.postMessage(tally);
});
