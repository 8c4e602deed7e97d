import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const KAFKA_SH = fileURLToPath(new URL('../../../scripts/kafka.sh', import.meta.url));
const run = promisify(execFile);

/** A Kafka broker of one test file (scripts/kafka.sh in a directory of its own), for outages: halting the run's shared broker would disturb the other files. */
export interface PrivateKafka {
  /** host:port */
  brokers: string;
  /** Stops the broker process, keeping its data and port. */
  halt(): Promise<void>;
  /** Starts a halted broker again on the same port; resolves once it serves. */
  resume(): Promise<void>;
  /** Stops the broker process where it is (SIGSTOP: connections hang instead of being refused), or lets it go on (SIGCONT). */
  freeze(frozen: boolean): void;
  /** Stops it (resuming first is not needed) and removes its directory. */
  stop(): Promise<void>;
}

/**
 * Starts a broker of its own. kafka.sh runs without blocking the event loop: a stack under test in
 * this process must keep serving while a halt or resume takes its seconds.
 */
export async function startPrivateKafka(): Promise<PrivateKafka> {
  const dir = mkdtempSync(join(tmpdir(), 'workauto-private-kafka-'));
  const kafka = async (command: 'start' | 'stop' | 'halt' | 'resume'): Promise<string> => {
    try {
      const { stdout } = await run('bash', [KAFKA_SH, command], {
        encoding: 'utf8',
        env: { ...process.env, KAFKA_RUN_DIR: dir },
      });
      return stdout.trim().split('\n').pop() ?? '';
    } catch (err) {
      const e = err as { code?: unknown; stderr?: string };
      throw new Error(`kafka.sh ${command} failed (${String(e.code)}): ${e.stderr ?? ''}`, { cause: err });
    }
  };
  const line = await kafka('start');
  if (!line.startsWith('KAFKA_BROKERS=')) throw new Error(`kafka.sh start printed ${line}`);
  return {
    brokers: line.slice('KAFKA_BROKERS='.length),
    halt: async () => void (await kafka('halt')),
    resume: async () => void (await kafka('resume')),
    freeze: (frozen) => process.kill(Number(readFileSync(join(dir, 'pid'), 'utf8')), frozen ? 'SIGSTOP' : 'SIGCONT'),
    stop: async () => {
      await kafka('stop');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
