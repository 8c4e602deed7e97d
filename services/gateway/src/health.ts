/**
 * Liveness (the process answers) and readiness (this gateway can serve). Readiness is about the
 * gateway alone: a downstream that is down makes only its own routes answer 503 (its circuit names
 * it), never every gateway replica unready (which would take the whole API offline). The gateway's
 * own database is not a readiness condition either: it only backs Idempotency-Key, every replica
 * shares it, so dropping replicas would not help; POSTs with a key answer 503 while it is away (see
 * docs/decisions.md). The body lists the services whose circuit is open, for operators.
 */
import { Router } from 'express';
import type { Downstream } from '@workauto/grpc';

export function healthRoutes(downstreams: Map<string, Downstream>, isReady: () => boolean): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', (_req, res) => {
    const down = [...downstreams].filter(([, d]) => d.isDown).map(([name]) => name);
    const ready = isReady();
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'unavailable', services_down: down });
  });
  return router;
}
