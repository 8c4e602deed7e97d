/** Liveness (the process answers) and readiness (its database and every configured downstream answer). */
import { Router } from 'express';
import type { Pool } from '@workauto/db';
import type { Downstream } from '@workauto/grpc';

export function healthRoutes(downstreams: Map<string, Downstream>, pool: Pool): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const checks: [string, Promise<boolean>][] = [
      // The gateway's own database (Idempotency-Key records): every POST needs it.
      ['gateway-database', pool.query('SELECT 1').then(() => true, () => false)],
      ...[...downstreams].map(([name, d]) => [name, d.isServing()] as [string, Promise<boolean>]),
    ];
    const results = await Promise.all(checks.map(async ([name, ok]) => [name, await ok] as const));
    const notReady = results.filter(([, ok]) => !ok).map(([name]) => name);
    res.status(notReady.length ? 503 : 200).json({ status: notReady.length ? 'unavailable' : 'ready', not_ready: notReady });
  });
  return router;
}
