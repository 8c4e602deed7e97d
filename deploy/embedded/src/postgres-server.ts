/**
 * make dev's PostgreSQL, in a process (and process group) of its own: Ctrl-C in a terminal signals
 * the whole foreground group, and PostgreSQL, signalled with the services, would drop their
 * connections while they drain (a dozen warnings with stack traces at every stop). Started by
 * main.ts with `fork(…, { detached: true })`: it answers the server's URL over IPC, and stops the
 * server when main.ts asks (`stop`) or goes away (the IPC channel closes, whatever killed it).
 *
 *   node deploy/embedded/dist/postgres-server.js <data folder>
 */
import { startEmbeddedPostgres } from '@workauto/testing';

const dir = process.argv[2];
if (!dir || !process.send) {
  console.error('usage: forked by deploy/embedded/dist/main.js with the data folder as its argument');
  process.exit(2);
}
// Signals are main.ts's to handle; this process stops only when it is told or main.ts is gone.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => undefined);
const pg = await startEmbeddedPostgres({ dir, port: 0, persistent: true });
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.removeAllListeners(signal);
let stopping: Promise<void> | undefined;
const stop = () =>
  (stopping ??= pg.stop().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(`PostgreSQL did not stop cleanly: ${String(err)}`);
      process.exit(1);
    },
  ));
process.on('message', (m) => m === 'stop' && void stop());
process.on('disconnect', () => void stop());
process.send({ url: pg.url });
