/**
 * Imported first by main.ts, so that from the process's first milliseconds a SIGTERM or SIGINT ends
 * it (exit 0) while the heavy modules (OpenTelemetry, gRPC) still load: nothing serves yet, so
 * there is nothing to drain. Without a handler, Node running as PID 1 (no init) ignores SIGTERM and
 * a pod stopped during start-up would wait out its whole grace period. runProcess replaces these
 * handlers with the draining ones.
 */
const exitNow = () => process.exit(0);
process.on('SIGTERM', exitNow);
process.on('SIGINT', exitNow);

export function removeEarlySignalHandlers(): void {
  process.removeListener('SIGTERM', exitNow);
  process.removeListener('SIGINT', exitNow);
}
