/**
 * A test's third party in a process of its own (a tenant's server on its own port, as production
 * reaches it): `main` gets its options as JSON in argv[2] and prints one JSON line once it listens.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface ServerProcess<T> {
  /** What the process printed once it listened (its URLs). */
  info: T;
  /** Ends the process (SIGTERM) and waits for it; nothing when it ended already. */
  stop(): Promise<void>;
}

/** Spawns `main` (a URL of a .js file) with this Node and waits for its first line. */
export async function spawnServerProcess<T>(main: URL, options: unknown): Promise<ServerProcess<T>> {
  const file = fileURLToPath(main);
  const child = spawn(process.execPath, [file, JSON.stringify(options)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const first = await Promise.race([
    once(lines, 'line').then(([line]) => line as string),
    once(child, 'exit').then(([code]) => {
      throw new Error(`${file} exited (${code}) before it listened`);
    }),
  ]);
  lines.close();
  return {
    info: JSON.parse(first) as T,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      await exited;
    },
  };
}
