/**
 * A dependency (the database, the event broker) still away when the start-up deadline passed. Its
 * message is the one line a crash-looping pod logs: what was awaited, where, for how long, the
 * last reason and what to check. Imports nothing, so main.ts may use it before telemetry loads.
 */
export class DependencyUnavailableError extends Error {
  override name = 'DependencyUnavailableError';
  constructor(
    readonly dependency: string,
    readonly where: string,
    readonly waitedMs: number,
    readonly reason: string,
    hint: string,
  ) {
    super(
      `the ${dependency} (${where}) did not become available within ${Math.round(waitedMs / 1_000)} s of start-up (last error: ${reason}); ${hint}, or raise STARTUP_TIMEOUT_MS`,
    );
  }
}
