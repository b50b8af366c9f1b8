import { Resolver, type LookupAddress } from 'node:dns';
import { createSocket, type RemoteInfo } from 'node:dgram';
import { isIP } from 'node:net';
import type { ResolveAll } from '../../src/net/connect-guard';

/** What a name answers: fixed lists, or a function called per query (rebinding: a different answer each time). */
export interface DnsRecords {
  A?: string[] | ((query: number) => string[]);
  AAAA?: string[] | ((query: number) => string[]);
}

export interface DnsServer {
  /** `127.0.0.1:<port>`, for `Resolver.setServers`. */
  address: string;
  port: number;
  /** Queries received per lower-case name (A and AAAA counted separately, as `name/A`). */
  queries: Map<string, number>;
  stop(): Promise<void>;
}

const TYPE_A = 1;
const TYPE_AAAA = 28;

/**
 * A tiny authoritative DNS server over UDP on 127.0.0.1, port 0: answers A and AAAA questions from
 * `zone` with TTL 0 (so nothing is cached between lookups), NXDOMAIN for names it does not know, an
 * empty answer for a known name without records of the asked type. Enough for `dns.Resolver`
 * (c-ares) pointed at it with `setServers`.
 */
export async function startDnsServer(zone: Record<string, DnsRecords>): Promise<DnsServer> {
  const records = new Map(Object.entries(zone).map(([k, v]) => [k.toLowerCase().replace(/\.$/, ''), v]));
  const queries = new Map<string, number>();
  const socket = createSocket('udp4');
  socket.on('message', (msg: Buffer, rinfo: RemoteInfo) => {
    const answer = respond(msg, records, queries);
    if (answer) socket.send(answer, rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  const { port } = socket.address();
  return {
    address: `127.0.0.1:${port}`,
    port,
    queries,
    stop: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

function respond(msg: Buffer, records: Map<string, DnsRecords>, queries: Map<string, number>): Buffer | undefined {
  if (msg.length < 12 || msg.readUInt16BE(4) !== 1) return undefined;
  // Question: labels, then type and class.
  const labels: string[] = [];
  let off = 12;
  while (off < msg.length && msg[off] !== 0) {
    const len = msg[off]!;
    if (len > 63 || off + 1 + len > msg.length) return undefined;
    labels.push(msg.subarray(off + 1, off + 1 + len).toString('latin1'));
    off += 1 + len;
  }
  off += 1;
  if (off + 4 > msg.length) return undefined;
  const qtype = msg.readUInt16BE(off);
  const question = msg.subarray(12, off + 4);
  const name = labels.join('.').toLowerCase();
  const entry = records.get(name);
  const typeName = qtype === TYPE_A ? 'A' : qtype === TYPE_AAAA ? 'AAAA' : String(qtype);
  const n = (queries.get(`${name}/${typeName}`) ?? 0) + 1;
  queries.set(`${name}/${typeName}`, n);
  const spec = entry === undefined ? undefined : qtype === TYPE_A ? entry.A : qtype === TYPE_AAAA ? entry.AAAA : undefined;
  const addresses = spec === undefined ? [] : typeof spec === 'function' ? spec(n) : spec;
  const answers = addresses.map((a) => {
    const rdata = qtype === TYPE_A ? v4Bytes(a) : v6Bytes(a);
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
    rr.writeUInt16BE(qtype, 2);
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(0, 6); // TTL 0: every lookup asks again
    rr.writeUInt16BE(rdata.length, 10);
    return Buffer.concat([rr, rdata]);
  });
  const header = Buffer.alloc(12);
  header.writeUInt16BE(msg.readUInt16BE(0), 0); // id
  const rcode = entry === undefined ? 3 : 0; // NXDOMAIN for unknown names
  header.writeUInt16BE(0x8400 | (msg.readUInt16BE(2) & 0x0100) | rcode, 2); // QR, AA, RD copied
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(answers.length, 6);
  return Buffer.concat([header, question, ...answers]);
}

function v4Bytes(a: string): Buffer {
  if (isIP(a) !== 4) throw new Error(`not an IPv4 address: ${a}`);
  return Buffer.from(a.split('.').map(Number));
}

function v6Bytes(a: string): Buffer {
  if (isIP(a) !== 6) throw new Error(`not an IPv6 address: ${a}`);
  let text = a;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const b = v4Bytes(dotted[1]!);
    text = `${text.slice(0, -dotted[1]!.length)}${b.readUInt16BE(0).toString(16)}:${b.readUInt16BE(2).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  for (const [i, g] of groups.entries()) out.writeUInt16BE(parseInt(g, 16), i * 2);
  return out;
}

/**
 * A `ResolveAll` for the connect guard that asks `server` (and nothing else) through c-ares:
 * A and AAAA in parallel, like getaddrinfo with AF_UNSPEC. ENOTFOUND when neither has an answer.
 */
export function resolverFor(server: DnsServer): ResolveAll {
  return (hostname, _options, callback) => {
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([server.address]);
    const ask = (fn: (h: string, cb: (err: NodeJS.ErrnoException | null, a: string[]) => void) => void) =>
      new Promise<string[]>((resolve) => fn.call(resolver, hostname, (err, a) => resolve(err ? [] : a)));
    Promise.all([ask(resolver.resolve4), ask(resolver.resolve6)]).then(([v4, v6]) => {
      const addresses: LookupAddress[] = [
        ...v4.map((address) => ({ address, family: 4 })),
        ...v6.map((address) => ({ address, family: 6 })),
      ];
      if (addresses.length === 0) {
        callback(Object.assign(new Error(`queryA ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname }), []);
        return;
      }
      callback(null, addresses);
    });
  };
}
