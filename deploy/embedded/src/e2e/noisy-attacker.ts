/**
 * One attacker of the noisy-neighbour test (noisy-neighbour.test.ts), run in a worker thread so that
 * its requests are made on an event loop of their own: the test's main thread times tenant B, and
 * an attacker's JavaScript (hundreds of sockets, 64 loops) must not add to B's measured latency.
 * It runs `workerData` (an AttackSpec) each time the main thread posts 'start', until it posts
 * 'stop'; then it posts the statuses it got, by status (0: no answer, e.g. a connection cut).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { setTimeout as sleep } from 'node:timers/promises';
import { stalledRequest } from '@workauto/testing/stalled-client';

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

/** One run of the attack: what ends it, and the statuses it got meanwhile. */
function run(): { statuses: number[]; stop(): Promise<void> } {
  const statuses: number[] = [];
  const gone = new AbortController();
  let stopping = false;
  const running: Promise<unknown>[] = [];
  let closers: (() => void)[] = [];
  if (spec.kind === 'loop') {
    const s = spec;
    for (let i = 0; i < s.loops; i++)
      running.push(
        (async () => {
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
        })(),
      );
  } else if (spec.kind === 'open') {
    const s = spec;
    running.push(
      Promise.allSettled(
        Array.from({ length: s.count }, async () => {
          const res = await fetch(s.url, { headers: s.headers ?? {}, signal: gone.signal });
          statuses.push(res.status);
          await res.arrayBuffer();
        }),
      ),
    );
  } else {
    const held = Array.from({ length: spec.count }, () => stalledRequest(spec.url, spec.headers));
    for (const r of held) void r.status.then((status) => statuses.push(status));
    closers = held.map((r) => () => r.close());
  }
  return {
    statuses,
    stop: async () => {
      stopping = true;
      gone.abort();
      for (const close of closers) close();
      await Promise.allSettled(running);
    },
  };
}

let current: ReturnType<typeof run> | undefined;
parentPort!.on('message', (message: 'start' | 'stop') => {
  if (message === 'start') {
    current = run();
    return;
  }
  const ended = current!;
  current = undefined;
  void ended.stop().then(() => {
    const tally: Record<number, number> = {};
    for (const s of ended.statuses) tally[s] = (tally[s] ?? 0) + 1;
    parentPort!.postMessage(tally);
  });
});
parentPort!.postMessage('ready');
