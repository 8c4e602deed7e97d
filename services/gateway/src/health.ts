/** Liveness (the process answers) and readiness (every configured downstream is SERVING). */
import { Router } from 'express';
import type { Downstream } from '@workauto/grpc';

export function healthRoutes(downstreams: Map<string, Downstream>): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const results = await Promise.all([...downstreams].map(async ([name, d]) => [name, await d.isServing()] as const));
    const notReady = results.filter(([, ok]) => !ok).map(([name]) => name);
    res.status(notReady.length ? 503 : 200).json({ status: notReady.length ? 'unavailable' : 'ready', not_ready: notReady });
  });
  return router;
}
