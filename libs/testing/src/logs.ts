import { tapLogs } from '@workauto/logger';

/** Collects every log line the process writes from now on; `stop()` ends the capture. */
export function captureLogs(): { lines: string[]; text(): string; stop(): void } {
  const lines: string[] = [];
  const stop = tapLogs((chunk) => lines.push(chunk));
  return { lines, text: () => lines.join(''), stop };
}

/**
 * The highest `attempt` the "waiting for the <dependency>" log lines among `lines` name (0 for
 * none): a start-up that retried rather than failed logs a higher one each time.
 */
export function waitingAttempts(lines: Iterable<string>, dependency: string): number {
  let highest = 0;
  for (const line of lines)
    for (const entry of line.split('\n'))
      if (entry.includes(`waiting for the ${dependency}`) && entry.startsWith('{'))
        highest = Math.max(highest, Number((JSON.parse(entry) as { attempt?: number }).attempt ?? 0));
  return highest;
}
