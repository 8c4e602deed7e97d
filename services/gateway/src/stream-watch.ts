/**
 * Open streams whose credential is checked again while they run: a Server-Sent Events stream ends
 * within seconds once its key is revoked, its member deactivated or its member's access drops below
 * the route's level (docs/operations.md, "Fairness between tenants"; docs/agents.md). Every
 * REAUTHORIZE_MS the credentials of the open streams are looked up again at identity, once per
 * credential however many streams use it (never per event), and each stream is checked against its
 * route's policy; a stream the answer refuses is ended with that refusal. A lookup that fails for
 * another reason (identity away) leaves the streams open until a lookup answers.
 */
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '@workauto/logger';
import type { Principal } from '@workauto/protos/workauto/identity/v1/identity.js';
import type { Authenticator, RequestCredential } from './auth.js';
import type { Route } from './routes.js';

/** How often open streams' credentials are checked: a refused stream ends within this plus one lookup. */
const REAUTHORIZE_MS = 2_000;

export interface WatchedStream {
  credential: RequestCredential;
  route: Pick<Route, 'auth' | 'domain' | 'level'>;
  /** Signs the lookup's call to identity. */
  metadata: () => grpc.Metadata;
  /** Ends the stream with the refusal (the client is told why). */
  end(refusal: unknown): void;
}

/** Codes that mean the credential no longer reads the route: the stream ends. */
const REFUSALS = new Set([grpc.status.UNAUTHENTICATED, grpc.status.PERMISSION_DENIED]);

export class StreamWatch {
  private readonly streams = new Set<WatchedStream>();
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  constructor(
    private readonly auth: Authenticator,
    private readonly logger: Logger,
    private readonly intervalMs = REAUTHORIZE_MS,
  ) {}

  /** Checks the stream's credential until the returned function is called (when the stream ends). */
  watch(stream: WatchedStream): () => void {
    this.streams.add(stream);
    if (!this.timer) {
      this.timer = setInterval(() => void this.check(), this.intervalMs);
      this.timer.unref();
    }
    return () => {
      this.streams.delete(stream);
      if (this.streams.size === 0) this.stop();
    };
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One round: each credential looked up once, each of its streams checked against its route. */
  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const byCredential = new Map<string, WatchedStream[]>();
      for (const s of this.streams)
        byCredential.set(s.credential.key, [...(byCredential.get(s.credential.key) ?? []), s]);
      await Promise.all(
        [...byCredential.values()].map(async (group) => {
          const first = group[0]!;
          let principal: Principal;
          try {
            principal = await this.auth.current(first.credential, first.metadata);
          } catch (err) {
            if (isRefusal(err)) for (const s of group) s.end(err);
            else
              this.logger.warn(
                { streams: group.length, cause: String((err as Error).message).slice(0, 200) },
                "an open stream's credential could not be checked again; it stays open until a check answers",
              );
            return;
          }
          for (const s of group) {
            try {
              this.auth.check(s.route, principal);
            } catch (err) {
              s.end(err);
            }
          }
        }),
      );
    } finally {
      this.checking = false;
    }
  }
}

function isRefusal(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'number' && REFUSALS.has(code);
}
