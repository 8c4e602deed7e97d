/**
 * Which IP addresses a tenant-supplied URL may reach: only global unicast ones, unless an operator
 * allowed a range. Pure functions over ipaddr.js's classification.
 */
import ipaddr from 'ipaddr.js';

type Address = ipaddr.IPv4 | ipaddr.IPv6;
export type Cidr = [Address, number];

/** ipaddr.js range names, said the way an error message should say them. */
const RANGE_WORDS: Record<string, string> = {
  unspecified: 'an unspecified address (0.0.0.0/8, ::)',
  broadcast: 'the broadcast address',
  multicast: 'a multicast address',
  linkLocal: 'a link-local address (169.254.0.0/16, fe80::/10: cloud metadata lives there)',
  loopback: 'a loopback address',
  carrierGradeNat: 'a carrier-grade NAT address (100.64.0.0/10)',
  private: 'a private address (RFC 1918)',
  uniqueLocal: 'a unique-local IPv6 address (fc00::/7)',
  reserved: 'a reserved address (not routed on the internet)',
  benchmarking: 'a benchmarking address (198.18.0.0/15, 2001:2::/48)',
  rfc6052: 'a local-use NAT64 address (64:ff9b:1::/48)',
  teredo: 'a Teredo tunnel address (2001::/32)',
};

/** IANA hands out IPv6 global unicast from 2000::/3 only. */
const GLOBAL_UNICAST_V6: Cidr = ipaddr.parseCIDR('2000::/3');

/** A comma-separated list of CIDR ranges (IPv4 in four-part decimal, or IPv6), or its first bad entry. */
export function parseCidrList(text: string): { cidrs: Cidr[] } | { bad: string } {
  const cidrs: Cidr[] = [];
  for (const entry of text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)) {
    const valid = entry.includes(':') ? ipaddr.IPv6.isValidCIDR(entry) : ipaddr.IPv4.isValidCIDRFourPartDecimal(entry);
    if (!valid) return { bad: entry };
    cidrs.push(ipaddr.parseCIDR(entry));
  }
  return { cidrs };
}

/**
 * Why `address` (an IP literal as net.isIP accepts it) may not be dialled ("a loopback address"), or
 * null when it may: a global unicast address, or one inside an allowed range. With `nameAddress`
 * false the reason names only the rule, never an address (for addresses a host name resolved to,
 * which the tenant must not learn).
 */
export function addressRefusal(address: string, allowed: readonly Cidr[], nameAddress = true): string | null {
  const parsed = ipaddr.parse(address);
  const embedded = parsed.kind() === 'ipv6' ? embeddedIPv4(parsed as ipaddr.IPv6) : null;
  if (allowed.some((cidr) => inCidr(parsed, cidr) || (embedded !== null && inCidr(embedded, cidr)))) return null;
  return refusal(parsed, nameAddress);
}

function refusal(address: Address, nameAddress: boolean): string | null {
  const range = address.range();
  if (address.kind() === 'ipv4') return range === 'unicast' ? null : describe(range);
  // ::1 and :: first, or they would read as the IPv4-compatible forms of 0.0.0.1 and 0.0.0.0.
  if (range === 'loopback' || range === 'unspecified') return describe(range);
  const v4 = embeddedIPv4(address as ipaddr.IPv6);
  if (v4 !== null) {
    const inner = refusal(v4, nameAddress);
    if (inner === null) return null;
    return nameAddress ? `${inner}: ${v4.toString()} written as IPv6` : `${inner} written as IPv6`;
  }
  if (range !== 'unicast') return describe(range);
  return address.match(GLOBAL_UNICAST_V6) ? null : 'outside the IPv6 global unicast space (2000::/3)';
}

/**
 * The IPv4 address an IPv6 address stands for, where its form says so: IPv4-mapped (::ffff:a.b.c.d),
 * IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and
 * 6to4 (2002:aabb:ccdd::). Such an address reaches, or is routed to, that IPv4 address.
 */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | null {
  const p = address.parts;
  const zero = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  const [p0, p1, p2, p4, p5, p6, p7] = [p[0]!, p[1]!, p[2]!, p[4]!, p[5]!, p[6]!, p[7]!];
  if (zero(0, 5) && p5 === 0xffff) return v4(p6, p7);
  if (zero(0, 4) && p4 === 0xffff && p5 === 0) return v4(p6, p7);
  if (zero(0, 6)) return v4(p6, p7);
  if (p0 === 0x64 && p1 === 0xff9b && zero(2, 6)) return v4(p6, p7);
  if (p0 === 0x2002) return v4(p1, p2);
  return null;
}

function inCidr(address: Address, [network, bits]: Cidr): boolean {
  return address.kind() === network.kind() && address.match(network, bits);
}

function describe(range: string): string {
  return RANGE_WORDS[range] ?? `a special-purpose address (${range})`;
}
