/**
 * What the scripts/compare-*.mjs share: the libraries they compare our code with, installed on demand
 * into scripts/compare (pinned there with their lockfile, not a workspace, so neither `make build` nor
 * the images carry them), a fresh database per check on the run's PostgreSQL, and a timer.
 * docs/decisions.md, "Our own infrastructure against the libraries", gives the figures and the commands.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { ensureDatabase } from '@workauto/db';

const COMPARE_DIR = new URL('./compare/', import.meta.url).pathname;

/** Imports `name` from scripts/compare, running `npm ci` there once if it was never installed. */
export async function library(name) {
  if (!existsSync(`${COMPARE_DIR}node_modules/.package-lock.json`)) {
    console.error(`installing the compared libraries into ${COMPARE_DIR} (npm ci, once)…`);
    execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', COMPARE_DIR], { stdio: 'inherit' });
  }
  const require = createRequire(`${COMPARE_DIR}package.json`);
  return import(pathToFileURL(require.resolve(name)).href);
}

/** The run's PostgreSQL server (with-infra sets TEST_DATABASE_URL); exits with the command to use when unset. */
export function serverUrl() {
  const server = process.env.TEST_DATABASE_URL;
  if (!server) {
    console.error(
      'TEST_DATABASE_URL is not set: run through with-infra, e.g.\n' +
        `  make build && WORKAUTO_KAFKA=off node deploy/embedded/dist/with-infra.js -- node ${process.argv[1]}`,
    );
    process.exit(2);
  }
  return server;
}

let databases = 0;
/** A new, empty database on the run's server for one check. */
export function freshDatabase(label) {
  return ensureDatabase(serverUrl(), `cmp_${label}_${process.pid}_${++databases}`);
}

/** Milliseconds `fn` took, with its result. */
export async function timed(fn) {
  const started = performance.now();
  const result = await fn();
  return { ms: performance.now() - started, result };
}

/** Resolves once `check()` is true (polled every `everyMs`), or rejects naming `what` after `timeoutMs`. */
export async function until(what, check, timeoutMs = 30_000, everyMs = 20) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** Counts attempts in flight per label (a key, a group) and remembers the most seen at once. */
export class InFlight {
  #now = new Map();
  #max = new Map();
  enter(...labels) {
    for (const l of labels) {
      const n = (this.#now.get(l) ?? 0) + 1;
      this.#now.set(l, n);
      if (n > (this.#max.get(l) ?? 0)) this.#max.set(l, n);
    }
  }
  leave(...labels) {
    for (const l of labels) this.#now.set(l, this.#now.get(l) - 1);
  }
  /** The most in flight at once of any label that starts with `prefix`. */
  max(prefix = '') {
    let m = 0;
    for (const [l, n] of this.#max) if (l.startsWith(prefix) && n > m) m = n;
    return m;
  }
}
