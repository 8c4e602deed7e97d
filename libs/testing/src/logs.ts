import { tapLogs } from '@workauto/logger';

/** Collects every log line the process writes from now on; `stop()` ends the capture. */
export function captureLogs(): { lines: string[]; text(): string; stop(): void } {
  const lines: string[] = [];
  const stop = tapLogs((chunk) => lines.push(chunk));
  return { lines, text: () => lines.join(''), stop };
}
