import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { GatewayError } from '../errors/gateway-error';

// Addresses a fetch must not reach unless exempted: the server-side request forgery guard.
const V4_RESTRICTED: [string, number][] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
];
const V6_RESTRICTED: [string, number][] = [
  // ::/96 holds :: and ::1 and the deprecated IPv4-compatible form (::a.b.c.d, which WHATWG URL writes as
  // ::7f00:1); ::ffff:0:0:0/96 is the IPv4-translated form. Neither has a legitimate use as a jar origin.
  ['::', 96],
  ['::ffff:0:0:0', 96],
  ['fc00::', 7],
  ['fe80::', 10],
  ['fec0::', 10],
  ['ff00::', 8],
  ['2001:db8::', 32],
  ['100::', 64],
];

const V6_TUNNEL_RESTRICTED: [string, number][] = [
  // Teredo (2001:0::/32, RFC 4380) embeds two IPv4 addresses, the server's in bits 32–63 and the
  // client's inverted in the last 32 bits, and reaches them through a UDP tunnel. Refused whatever
  // it embeds: it is a NAT-traversal prefix for client hosts, never a store's address, and decoding
  // both halves would only widen what has to be right.
  ['2001::', 32],
];

/** 6to4 (2002::/16, RFC 3056) embeds an IPv4 address in bits 16–47: 2002:7f00:1:: is 127.0.0.1. */
function sixToFour([net, prefix]: [string, number]): [string, number] {
  const [a, b, c, d] = net.split('.').map(Number) as [number, number, number, number];
  return [`2002:${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}::`, 16 + prefix];
}

const blocked = new BlockList();
for (const [net, prefix] of V4_RESTRICTED) blocked.addSubnet(net, prefix, 'ipv4');
// A 6to4 address is restricted when the IPv4 address it embeds is; one with a public IPv4 address
// is an ordinary (if deprecated, RFC 7526) global address.
for (const [net, prefix] of [...V6_RESTRICTED, ...V6_TUNNEL_RESTRICTED, ...V4_RESTRICTED.map(sixToFour)])
  blocked.addSubnet(net, prefix, 'ipv6');

/** The IPv4 address embedded in an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::/96) IPv6 address. */
function embeddedV4(address: string): string | undefined {
  const lower = address.toLowerCase();
  const mapped = /^(?:0{0,4}:){0,5}(?::|ffff:)(?:ffff:)?(\d+\.\d+\.\d+\.\d+)$/.exec(lower) ?? /^64:ff9b::(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped) return mapped[1];
  const hex = /^(?:::ffff:|64:ff9b::|64:ff9b:0:0:0:0:)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower);
  if (hex) {
    const hi = parseInt(hex[1]!, 16);
    const lo = parseInt(hex[2]!, 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return undefined;
}

/**
 * True when `address` (an IP literal) is in a restricted range, including the forms that embed an
 * IPv4 address: IPv4-mapped, IPv4-compatible, NAT64, 6to4 (when the embedded address is
 * restricted) and Teredo (always).
 */
export function isRestrictedAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return blocked.check(address, 'ipv4');
  if (family === 6) {
    const v4 = embeddedV4(address);
    // The IPv6 check as well: ::8.8.8.8 (IPv4-compatible) is refused like ::808:808.
    if (v4 !== undefined) return blocked.check(v4, 'ipv4') || blocked.check(address, 'ipv6');
    if (address.toLowerCase().startsWith('64:ff9b:1:')) return true; // local-use NAT64 (RFC 8215)
    return blocked.check(address, 'ipv6');
  }
  return true; // not an IP: refuse rather than guess
}

/**
 * Enforces the restricted-address policy (SSRF guard) when a plugin connects: loopback,
 * link-local, private, unique-local, multicast and unspecified addresses are refused unless the
 * `host:port` is listed in `gateway.artifacts.restricted-hosts.allowed`. Plugins wire `lookup` into
 * their sockets (it checks every resolved address) and call `checkHost` for IP-literal hosts, which
 * Node connects to without a lookup.
 */
export interface ConnectGuard {
  /** False when gateway.artifacts.disallow-restricted-hosts is off. */
  readonly enabled: boolean;
  lookup: LookupFunction;
  /** Throws `GW_FETCH_RESTRICTED_HOST` when `host:port` may not be contacted. */
  checkHost(host: string, port: number): void;
  /** `lookup` for a specific port (the exemption list is per host:port). */
  lookupFor(port: number): LookupFunction;
  /**
   * Throws `GW_FETCH_URI_NOT_ALLOWED` when a redirect leads outside `gateway.artifacts.allowed-uris`.
   * A plugin that follows redirects calls it for every target before connecting (the submitted
   * URI itself is checked by the gateway before the plugin sees it). Optional for plugins written
   * before it existed; a guard built by the gateway always has it.
   */
  checkRedirect?(submitted: URL, target: URL): void;
}

/** `dns.lookup` with `all: true`: every address a name resolves to. */
export type ResolveAll = (
  hostname: string,
  options: LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => void,
) => void;

export interface ConnectGuardOptions {
  /** `gateway.artifacts.disallow-restricted-hosts`. */
  enabled: boolean;
  /** `host:port` entries of `gateway.artifacts.restricted-hosts.allowed`. */
  allowed: readonly string[];
  /**
   * The resolver whose answers are checked and then connected to; `dns.lookup` (the system
   * resolver) unless given. Tests inject one backed by a DNS server on loopback, to prove the check
   * holds for names that resolve to restricted addresses, including a rebinding name.
   */
  resolve?: ResolveAll;
  /** `gateway.artifacts.allowed-uris`, applied to redirect targets too. */
  allowList?: { check(target: URL, submitted: URL): void };
}

/** See `ConnectGuard`. */
export function createConnectGuard(opts: ConnectGuardOptions): ConnectGuard {
  const allowed = new Set(opts.allowed.map((e) => e.trim().toLowerCase()).filter(Boolean));
  const resolve: ResolveAll = opts.resolve ?? ((hostname, options, callback) => dnsLookup(hostname, options, callback));
  const exempt = (host: string, port: number) => {
    const h = host.toLowerCase().replace(/^\[|\]$/g, '');
    return allowed.has(`${h}:${port}`) || allowed.has(`[${h}]:${port}`);
  };
  const refuse = (host: string, port: number, address: string) =>
    new GatewayError('GW_FETCH_RESTRICTED_HOST', { uri: `${host}:${port}`, address, hostPort: `${host}:${port}` });

  const checkHost = (host: string, port: number) => {
    if (!opts.enabled) return;
    const bare = host.replace(/^\[|\]$/g, '');
    if (isIP(bare) && isRestrictedAddress(bare) && !exempt(bare, port)) throw refuse(bare, port, bare);
  };

  const lookupFor = (port: number): LookupFunction =>
    ((
      hostname: string,
      options: { all?: boolean; family?: number },
      callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      resolve(hostname, { ...options, all: true }, (err, addresses) => {
        if (err) return callback(err, options.all ? [] : '', 0);
        if (opts.enabled && !exempt(hostname, port)) {
          const bad = addresses.find((a) => isRestrictedAddress(a.address) && !exempt(a.address, port));
          if (bad) return callback(refuse(hostname, port, bad.address) as unknown as NodeJS.ErrnoException, options.all ? [] : '', 0);
        }
        if (options.all) return callback(null, addresses);
        const first = addresses[0];
        if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }), '', 0);
        callback(null, first.address, first.family);
      });
    }) as unknown as LookupFunction;

  // Without a port the exemption list cannot match; plugins should prefer lookupFor(port).
  const checkRedirect = (submitted: URL, target: URL) => {
    opts.allowList?.check(target, submitted);
  };
  return { enabled: opts.enabled, checkHost, lookupFor, lookup: lookupFor(-1), checkRedirect };
}

/**
 * The guard applied to one connection, with the connection's own port (the exemption list is per
 * host:port): `checkHost` now for an IP literal, which Node connects to without a lookup, and the
 * lookup to connect with, which checks every address a name resolves to at connect time (no
 * check-then-connect race). Throws `GW_FETCH_RESTRICTED_HOST` for a restricted literal.
 */
export function guardedConnection(
  guard: ConnectGuard,
  target: { protocol: string; hostname: string; port: string },
): { port: number; lookup: LookupFunction } {
  const port = Number(target.port) || (target.protocol === 'https:' ? 443 : 80);
  guard.checkHost(target.hostname, port);
  return { port, lookup: guard.lookupFor(port) };
}
