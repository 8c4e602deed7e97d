import { connect, type Socket } from 'node:net';

/**
 * An HTTP/1.1 GET from a client that reads the start of the answer and then nothing more (a
 * subscriber that hung, a slowloris): `status` resolves with the response's status once its first
 * bytes arrive; the socket stays open and paused until `close()`. Paused, the client does not see
 * the server end the connection either.
 */
export function stalledRequest(
  url: string,
  headers: Record<string, string> = {},
): { status: Promise<number>; close(): void; socket: Socket } {
  const target = new URL(url);
  const socket = connect(Number(target.port), target.hostname);
  const status = new Promise<number>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('data', (chunk) => {
      socket.pause();
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(chunk.toString('latin1'))?.[1] ?? 0));
    });
  });
  status.catch(() => undefined); // a socket closed by close() before any answer
  const head = Object.entries({ Host: target.host, ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  socket.write(`GET ${target.pathname}${target.search} HTTP/1.1\r\n${head}\r\n`);
  return { status, close: () => socket.destroy(), socket };
}
