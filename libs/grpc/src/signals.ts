import type { Logger } from '@workauto/logger';

/**
 * Runs stop() once on SIGTERM or SIGINT, then exits. A second signal exits at once, so a stuck
 * drain never needs `kill -9`.
 */
export function installShutdownSignals(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const started = performance.now();
    stop().then(
      () => {
        logger.info({ signal, ms: Math.round(performance.now() - started) }, 'stopped: calls drained, work finished');
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
