import { exitAfterLogs, type Logger } from '@workauto/logger';

/**
 * Runs stop() once on SIGTERM or SIGINT, then exits once its log lines are written. A second signal exits at once, so a stuck
 * drain never needs `kill -9`.
 */
export function installShutdownSignals(logger: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      logger.warn({ signal }, 'second signal: exiting now');
      void exitAfterLogs(1);
      return;
    }
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const started = performance.now();
    stop().then(
      () => {
        logger.info({ signal, ms: Math.round(performance.now() - started) }, 'stopped: calls drained, work finished');
        void exitAfterLogs(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        void exitAfterLogs(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
