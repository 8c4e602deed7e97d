/**
 * Outbound calls through a forward proxy (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), as egress-controlled
 * clusters require, with the egress policy still applied to the final destination: the tenant's
 * host is resolved and every address checked here, and the tunnel is opened to the checked address
 * (`CONNECT 203.0.113.7:443`), never to the name, so the proxy cannot resolve it to another one. TLS
 * to the destination runs inside the tunnel, verified against the host name.
 * (docs/operations.md, "Outbound calls to tenant URLs"; docs/decisions.md says why not undici's
 * ProxyAgent.)
 */
import net from 'node:net';
import tls from 'node:tls';
import { buildConnector } from 'undici';

/** The proxy settings of an environment: each variable in upper or lower case, as curl and Go read them. */
export interface ProxySettings {
  /** For https URLs (HTTPS_PROXY). */
  https?: URL;
  /** For http URLs (HTTP_PROXY). */
  http?: URL;
  /** NO_PROXY entries: `*`, host names (their subdomains too), `.suffix`, IP addresses, each with an optional `:port`. */
  noProxy: string[];
}

export function proxySettings(env: Record<string, string | undefined>): ProxySettings {
  const read = (name: string) => env[name] || env[name.toLowerCase()] || '';
  const url = (name: string): URL | undefined => {
    const text = read(name);
    if (!text) return undefined;
    const parsed = URL.parse(text.includes('://') ? text : `http://${text}`);
    if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:'))
      throw new Error(`${name} must be a proxy URL such as http://proxy.internal:3128 (got ${JSON.stringify(text)})`);
    return parsed;
  };
  return {
    https: url('HTTPS_PROXY'),
    http: url('HTTP_PROXY'),
    noProxy: read('NO_PROXY')
      .split(/[\s,]+/)
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  };
}

/** The proxy a request to host:port over `protocol` goes through, or undefined to connect directly. */
function proxyFor(settings: ProxySettings, protocol: string, host: string, port: number): URL | undefined {
  const proxy = protocol === 'https:' ? settings.https : settings.http;
  if (!proxy) return undefined;
  const name = host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  for (const entry of settings.noProxy) {
    if (entry === '*') return undefined;
    const m = /^(.*?)(?::(\d+))?$/.exec(entry)!;
    const [, pattern = '', entryPort] = m;
    if (entryPort && Number(entryPort) !== port) continue;
    const bare = pattern.replace(/^\[|\]$/g, '').replace(/^\*?\./, '');
    if (name === bare || (!net.isIP(bare) && name.endsWith(`.${bare}`))) return undefined;
  }
  return proxy;
}

interface TunnelOptions {
  /** The address the destination's name resolved to and the policy allowed. */
  address: string;
  port: number;
  proxy: URL;
  timeoutMs: number;
  /** TLS options of a connection to an https proxy (its CA). */
  tls?: tls.ConnectionOptions;
}

/** A socket to the proxy that carries bytes to address:port once the proxy answered CONNECT with 2xx. */
function openTunnel(o: TunnelOptions): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const port = Number(o.proxy.port || (o.proxy.protocol === 'https:' ? 443 : 80));
    const host = o.proxy.hostname.replace(/^\[|\]$/g, '');
    const socket =
      o.proxy.protocol === 'https:'
        ? tls.connect({ ...o.tls, host, port, servername: net.isIP(host) ? undefined : host })
        : net.connect({ host, port });
    const target = net.isIPv6(o.address) ? `[${o.address}]:${o.port}` : `${o.address}:${o.port}`;
    const fail = (err: Error) => {
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(
      () =>
        fail(
          Object.assign(new Error(`the proxy ${o.proxy.host} did not open a tunnel in time`), { code: 'ETIMEDOUT' }),
        ),
      o.timeoutMs,
    );
    socket.once('error', fail);
    socket.once(o.proxy.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      const auth =
        o.proxy.username || o.proxy.password
          ? `Proxy-Authorization: Basic ${Buffer.from(`${decodeURIComponent(o.proxy.username)}:${decodeURIComponent(o.proxy.password)}`).toString('base64')}\r\n`
          : '';
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
    });
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16_384) fail(new Error(`the proxy ${o.proxy.host} sent an oversized answer to CONNECT`));
        return;
      }
      socket.off('data', onData);
      clearTimeout(timer);
      socket.off('error', fail);
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(head.subarray(0, end).toString('latin1'))?.[1];
      if (!status?.startsWith('2')) {
        socket.destroy();
        return reject(
          Object.assign(
            new Error(`the proxy ${o.proxy.host} refused the tunnel (${status ? `HTTP ${status}` : 'no HTTP answer'})`),
            { code: 'EPROXY' },
          ),
        );
      }
      // Bytes past the answer belong to the tunnel (none before we send, but a proxy may be eager).
      const rest = head.subarray(end + 4);
      if (rest.length) socket.unshift(rest);
      resolve(socket);
    };
    socket.on('data', onData);
  });
}

/**
 * undici's connector for an Agent: directly (with the policy's lookup) unless a proxy applies; then
 * through a tunnel to the address `resolve` checked, with TLS to the destination inside it.
 */
export function proxyConnector(opts: {
  settings: ProxySettings;
  direct: buildConnector.connector;
  /** TLS (and timeout) options of connections to destinations, as the direct connector's. */
  tls: buildConnector.BuildOptions;
  /** The checked address of a host name (or an IP literal), or the policy's refusal as an error. */
  resolve(hostname: string): Promise<string>;
  timeoutMs: number;
}): buildConnector.connector {
  const inside = buildConnector(opts.tls);
  return (options, callback) => {
    const port = Number(options.port || (options.protocol === 'https:' ? 443 : 80));
    const proxy = proxyFor(opts.settings, options.protocol, options.hostname, port);
    if (!proxy) return opts.direct(options, callback);
    opts
      .resolve(options.hostname)
      .then((address) => openTunnel({ address, port, proxy, timeoutMs: opts.timeoutMs, tls: opts.tls }))
      .then(
        (socket) => {
          if (options.protocol !== 'https:') return callback(null, socket);
          const hostname = options.hostname.replace(/^\[|\]$/g, '');
          inside(
            {
              ...options,
              servername: options.servername ?? (net.isIP(hostname) ? undefined : hostname),
              httpSocket: socket,
            },
            callback,
          );
        },
        (err: Error) => callback(err, null),
      );
  };
}
