/**
 * Whether an address (a socket's peer, a bind address) or a URL's hostname is loopback: `localhost`,
 * 127.0.0.0/8 and ::1, also bracketed (`[::1]`, as `URL.hostname` gives it) and as IPv4-mapped IPv6
 * (a dual-stack listener reports `::ffff:127.0.0.1`).
 */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (a === '::1' || a === 'localhost') return true;
  const v4 = a.startsWith('::ffff:') ? a.slice(7) : a;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(v4);
}
