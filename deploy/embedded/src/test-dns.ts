/**
 * Loaded with `--import` into the processes of a test cluster with DNS discovery (processes.ts):
 * names under `.workauto.test` resolve to the addresses the names file (WORKAUTO_TEST_NAMES) lists
 * for them, read again at every lookup, as a headless Service's name resolves to its ready pods.
 * Every other name goes to the system resolver. grpc-js resolves `dns:` targets through
 * dns.promises.lookup, which is what this replaces.
 */
import dns from 'node:dns';
import { readFileSync } from 'node:fs';

const file = process.env.WORKAUTO_TEST_NAMES;
const SUFFIX = '.workauto.test';

if (file) {
  const system = dns.promises.lookup.bind(dns.promises);
  const lookup = async (hostname: string, options?: dns.LookupOptions) => {
    if (!hostname.endsWith(SUFFIX)) return system(hostname, options ?? {});
    const names = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string[]>;
    const addresses = (names[hostname] ?? []).map((address) => ({ address, family: 4 }));
    if (!addresses.length)
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
    return options?.all ? addresses : addresses[0]!;
  };
  dns.promises.lookup = lookup as typeof dns.promises.lookup;
}
