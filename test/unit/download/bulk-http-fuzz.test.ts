import { createCipheriv } from 'node:crypto';
import * as dns from 'node:dns';
import { get as httpGet } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { BulkHttpClient } from '../../../src/download/bulk-http';
import type { ConnectGuard } from '../../../src/plugin-kit/fs-plugin';

// A differential fuzz test of the bulk HTTP client's response parser against Node's own (llhttp,
// through node:http): random and mutated responses, served by a real loopback server that writes
// them split at random points, must be accepted or refused alike by both, and an accepted body
// must be the same bytes. Where the bulk client is deliberately stricter or more lenient, the
// divergence is named in ALLOWED below with its reason; anything else fails the test with the
// seed, the case number and the exact bytes.

/** Cases per run and the seed: FUZZ_SEED=<n> runs another sequence, FUZZ_CASES=<n> more or fewer, FUZZ_ONLY=<i> case i alone. */
const CASES = Number(process.env.FUZZ_CASES ?? 3000);
const SEED = Number(process.env.FUZZ_SEED ?? 0x0b1c_5eed);
const ONLY = process.env.FUZZ_ONLY === undefined ? undefined : Number(process.env.FUZZ_ONLY);
/** Cases in flight at once (each is two connections to the loopback server). */
const PARALLEL = 12;

const permissive: ConnectGuard = { enabled: false, lookup: dns.lookup, lookupFor: () => dns.lookup, checkHost() {} };

/** mulberry32: small, seeded, and the same sequence on every platform. */
class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed >>> 0;
  }
  /** 32 random bits. */
  word(): number {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
  next(): number {
    return this.word() / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  /** `n` bytes, from AES-CTR keyed by the next draws: as deterministic, and fast for megabytes (a JS loop is slow under jest). */
  bytes(n: number): Buffer {
    const key = Buffer.alloc(16);
    for (let i = 0; i < 16; i += 4) key.writeUInt32LE(this.word(), i);
    return createCipheriv('aes-128-ctr', key, Buffer.alloc(16)).update(Buffer.alloc(n));
  }
}

// ---------------------------------------------------------------------------------------------
// The response model: a well-formed response, which mutations then bend.

interface Chunk {
  size: string;
  ext: string;
  eol: string;
  data: Buffer;
  dataEol: string;
}

interface Model {
  statusLine: string;
  /** Raw field lines, without their line ends. */
  fields: string[];
  eol: string;
  /** How the body is framed: by Content-Length, chunked, or by the close. */
  framing: 'length' | 'chunked' | 'close';
  body: Buffer;
  chunks: Chunk[];
  /** The last chunk's line ("0", perhaps with an extension) and the trailer section. */
  last: { size: string; ext: string; eol: string };
  trailers: string[];
  trailerEol: string;
  finalEol: string;
  /** Interim (1xx) responses sent before the final one. */
  interim: string;
  /** Bytes after the response. */
  excess: Buffer;
}

const TOKEN_CHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

function token(rng: Rng, min = 1, max = 12): string {
  let s = '';
  for (let i = rng.range(min, max); i > 0; i--) s += TOKEN_CHARS[rng.int(TOKEN_CHARS.length)];
  return s;
}

function fieldValue(rng: Rng): string {
  let s = '';
  for (let i = rng.range(0, 40); i > 0; i--) s += String.fromCharCode(rng.chance(0.9) ? rng.range(0x21, 0x7e) : rng.pick([0x20, 0x09]));
  return s.trim();
}

function hexOf(n: number, rng: Rng): string {
  const h = n.toString(16);
  return rng.chance(0.3) ? h.toUpperCase() : h;
}

function chunkExt(rng: Rng): string {
  if (!rng.chance(0.2)) return '';
  const one = () => `;${token(rng, 1, 6)}${rng.chance(0.5) ? `=${rng.chance(0.5) ? token(rng, 1, 6) : `"${token(rng, 0, 6)}"`}` : ''}`;
  let s = one();
  if (rng.chance(0.3)) s += one();
  return s;
}

/** A random body: mostly small; now and then one that fills more than one of the client's 1 MiB slabs. */
function bodyOf(rng: Rng): Buffer {
  const r = rng.next();
  const n = r < 0.1 ? 0 : r < 0.7 ? rng.range(1, 600) : r < 0.99 ? rng.range(600, 40_000) : rng.range(1_000_000, 2_500_000);
  return rng.bytes(n);
}

function validModel(rng: Rng): Model {
  const framing = rng.pick(['length', 'length', 'chunked', 'chunked', 'close'] as const);
  const version = framing === 'close' && rng.chance(0.5) ? 'HTTP/1.0' : rng.chance(0.9) ? 'HTTP/1.1' : 'HTTP/1.0';
  const code = rng.pick(['200', '200', '200', '203', '206', '299', '404', '500', '503']);
  const reason = rng.pick(['', ' ', ' OK', ' Some Reason', ` ${fieldValue(rng)}`]);
  const fields: string[] = [];
  for (let i = rng.range(0, 5); i > 0; i--)
    fields.push(`X-${token(rng)}:${rng.pick(['', ' ', '  ', '\t'])}${fieldValue(rng)}${rng.pick(['', '', ' ', '\t'])}`);
  const body = bodyOf(rng);
  const chunks: Chunk[] = [];
  if (framing === 'chunked') {
    const te = rng.pick(['chunked', 'Chunked', 'CHUNKED', ' chunked ']);
    fields.splice(rng.int(fields.length + 1), 0, `${rng.pick(['Transfer-Encoding', 'transfer-encoding'])}:${te}`);
    for (let at = 0; at < body.length; ) {
      const n = Math.min(
        body.length - at,
        rng.chance(0.1) ? rng.range(1, 3) : rng.chance(0.9) ? rng.range(1, 9000) : rng.range(9000, 1_200_000),
      );
      const size = (rng.chance(0.1) ? '0'.repeat(rng.range(1, 4)) : '') + hexOf(n, rng);
      chunks.push({ size, ext: chunkExt(rng), eol: '\r\n', data: body.subarray(at, at + n), dataEol: '\r\n' });
      at += n;
    }
  } else if (framing === 'length') {
    fields.splice(rng.int(fields.length + 1), 0, `${rng.pick(['Content-Length', 'content-length', 'CONTENT-LENGTH'])}: ${body.length}`);
  }
  if (version === 'HTTP/1.1' && (framing === 'close' || rng.chance(0.3))) fields.push('Connection: close');
  const trailers: string[] = [];
  if (framing === 'chunked' && rng.chance(0.2))
    for (let i = rng.range(1, 3); i > 0; i--) trailers.push(`X-${token(rng)}: ${fieldValue(rng)}`);
  const interim = rng.chance(0.05) ? rng.pick(['HTTP/1.1 100 Continue\r\n\r\n', 'HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n']) : '';
  return {
    statusLine: `${version} ${code}${reason}`,
    fields,
    eol: '\r\n',
    framing,
    body,
    chunks,
    last: { size: '0', ext: chunkExt(rng), eol: '\r\n' },
    trailers,
    trailerEol: '\r\n',
    finalEol: '\r\n',
    interim,
    excess: Buffer.alloc(0),
  };
}

function serialize(m: Model): Buffer {
  const parts: Buffer[] = [];
  const s = (text: string) => parts.push(Buffer.from(text, 'latin1'));
  s(m.interim);
  s(`${m.statusLine}${m.eol}`);
  for (const f of m.fields) s(`${f}${m.eol}`);
  s(m.eol);
  if (m.framing === 'chunked') {
    for (const c of m.chunks) {
      s(`${c.size}${c.ext}${c.eol}`);
      parts.push(c.data);
      s(c.dataEol);
    }
    s(`${m.last.size}${m.last.ext}${m.last.eol}`);
    for (const t of m.trailers) s(`${t}${m.trailerEol}`);
    s(m.finalEol);
  } else {
    parts.push(m.body);
  }
  parts.push(m.excess);
  return Buffer.concat(parts);
}

// ---------------------------------------------------------------------------------------------
// Mutations: each bends one part of the grammar the way a hostile origin might.

const SIZE_FORMS: ((n: number, rng: Rng) => string)[] = [
  (n) => `0${n.toString(16)}`,
  (n) => `${'0'.repeat(20)}${n.toString(16)}`,
  (n) => `${'0'.repeat(200)}${n.toString(16)}`,
  (n) => n.toString(16).toUpperCase(),
  (n) => `${n.toString(16)} `,
  (n) => `${n.toString(16)}\t`,
  (n) => ` ${n.toString(16)}`,
  (n) => `-${n.toString(16)}`,
  (n) => `+${n.toString(16)}`,
  (n) => `0x${n.toString(16)}`,
  (n) => `${n.toString(16)}g`,
  () => '',
  () => 'ffffffffffffffffff',
  () => '10000000000000000',
  () => 'ffffffffffff',
  () => '1000000000000',
  () => 'fffffffffffffff',
  (n, rng) => (n + rng.range(1, 3)).toString(16),
  (n, rng) => Math.max(0, n - rng.range(1, 3)).toString(16),
];

const EXT_FORMS = [
  ';',
  ';;a',
  ';a;;b',
  ';a',
  ';a=b',
  ';a="b c"',
  '; a=b',
  ' ;a=b',
  ';a = b',
  ';a=',
  ';=b',
  ';a="unterminated',
  ';a=b;c',
  ';a=\x01',
  ';a\x7f',
  ';\xff',
  ';a="\\""',
  `;${'e'.repeat(5000)}`,
];
const EOL_FORMS = ['\n', '\r', '', '\r\r\n', '\n\r', ' \r\n', '\r\n\r\n'];
const FIELD_FORMS = [
  'No-Colon',
  'Space-Before : colon',
  ': no name',
  ' Leading-Space: x',
  '\tLeading-Tab: x',
  'X-Ctl: a\x01b',
  'X-Nul: a\x00b',
  'X-Del: a\x7fb',
  'X-High: a\xffb',
  'X-Cr: a\rb',
  'X-Name\x01: x',
  'X(Paren): x',
  'X-Empty:',
  'X-Spaces:     ',
];
const TE_FORMS = [
  'chunked',
  'gzip, chunked',
  'chunked, gzip',
  'identity',
  'gzip',
  'chunked,',
  ', chunked',
  'chunked , chunked',
  'xchunked',
  'chunked;q=1',
  '"chunked"',
  'chunk',
  '',
];
const CL_FORMS = ['-1', '+5', '0x10', ' 5 ', '5 5', '5,5', '5, 5', '5, 6', '', 'abc', '99999999999999999999', '1e3', '0005', '\t5'];
const STATUS_FORMS = [
  'HTTP/1.1 2000 OK',
  'HTTP/1.1 099 Low',
  'HTTP/1.1 000 Zero',
  'HTTP/1.1 20 OK',
  'HTTP/1.1 2x0 OK',
  'HTTP/2 200 OK',
  'HTTP/2.0 200 OK',
  'HTTP/1.2 200 OK',
  'HTTP/0.9 200 OK',
  'HTTP/1.1 200OK',
  'HTTP/1.1  200 OK',
  'http/1.1 200 OK',
  'HTTP/1.1 200 O\x01K',
  'HTTP/1.1 200 O\x7fK',
  'HTTP/1.1\t200 OK',
  'ICY 200 OK',
  'HTTP/1.1 200 \xe9t\xe9',
  'HTTP/1.1 200\tOK',
  'HTTP/1.1 101 Switching',
  'HTTP/1.1 204 No Content',
  'HTTP/1.1 304 Not Modified',
  'HTTP/1.1 199 Odd',
  'HTTP/1.1 999 Odd',
  'HTTP/11 200 OK',
  'HTTP/1.1 200 OK ',
];

/** A mutation name and what it did to the model (or to the bytes). */
type Mutation = (m: Model, rng: Rng) => string;

function ensureChunk(m: Model, rng: Rng): Chunk {
  if (m.framing !== 'chunked') {
    m.framing = 'chunked';
    m.fields = m.fields.filter((f) => !/^content-length:/i.test(f));
    m.fields.push('Transfer-Encoding: chunked');
  }
  if (m.chunks.length === 0) {
    const data = rng.bytes(rng.range(1, 40));
    m.chunks.push({ size: data.length.toString(16), ext: '', eol: '\r\n', data, dataEol: '\r\n' });
  }
  return rng.pick(m.chunks);
}

const MUTATIONS: Record<string, Mutation> = {
  chunkSize: (m, rng) => {
    const c = ensureChunk(m, rng);
    const form = rng.int(SIZE_FORMS.length);
    c.size = SIZE_FORMS[form]!(c.data.length, rng);
    return `chunk size form ${form}: ${JSON.stringify(c.size.slice(0, 30))}`;
  },
  lastChunkSize: (m, rng) => {
    ensureChunk(m, rng);
    m.last.size = rng.pick(['00', '0'.repeat(30), '0 ', '-0', '+0', '0x0', '', '1', 'O']);
    return `last chunk ${JSON.stringify(m.last.size)}`;
  },
  chunkExt: (m, rng) => {
    const c = ensureChunk(m, rng);
    c.ext = rng.pick(EXT_FORMS);
    return `chunk extension ${JSON.stringify(c.ext.slice(0, 20))}`;
  },
  chunkEol: (m, rng) => {
    const c = ensureChunk(m, rng);
    c.eol = rng.pick(EOL_FORMS);
    return `chunk-size line end ${JSON.stringify(c.eol)}`;
  },
  lastEol: (m, rng) => {
    ensureChunk(m, rng);
    m.last.eol = rng.pick(EOL_FORMS);
    return `last-chunk line end ${JSON.stringify(m.last.eol)}`;
  },
  dataEol: (m, rng) => {
    const c = ensureChunk(m, rng);
    c.dataEol = rng.pick([...EOL_FORMS, 'X\r\n', '\r\nX']);
    return `chunk data end ${JSON.stringify(c.dataEol)}`;
  },
  trailers: (m, rng) => {
    ensureChunk(m, rng);
    const form = rng.pick([...FIELD_FORMS, 'X-Ok: fine', `X-Big: ${'t'.repeat(5000)}`, 'Content-Length: 5', 'Transfer-Encoding: chunked']);
    m.trailers.splice(rng.int(m.trailers.length + 1), 0, form);
    if (rng.chance(0.2)) for (let i = 0; i < 20; i++) m.trailers.push(`X-Many-${i}: ${'v'.repeat(1000)}`);
    return `trailer ${JSON.stringify(form.slice(0, 30))}`;
  },
  trailerEol: (m, rng) => {
    ensureChunk(m, rng);
    if (m.trailers.length === 0) m.trailers.push('X-T: 1');
    m.trailerEol = rng.pick(EOL_FORMS);
    return `trailer line end ${JSON.stringify(m.trailerEol)}`;
  },
  finalEol: (m, rng) => {
    ensureChunk(m, rng);
    m.finalEol = rng.pick(EOL_FORMS);
    return `final line end ${JSON.stringify(m.finalEol)}`;
  },
  statusLine: (m, rng) => {
    m.statusLine = rng.pick(STATUS_FORMS);
    return `status line ${JSON.stringify(m.statusLine)}`;
  },
  headEol: (m, rng) => {
    m.eol = rng.pick(['\n', '\r', '\n\r', ' \r\n']);
    return `head line ends ${JSON.stringify(m.eol)}`;
  },
  oneHeadEol: (m, rng) => {
    if (m.fields.length === 0) m.fields.push('X-A: b');
    const i = rng.int(m.fields.length);
    m.fields[i] = `${m.fields[i]}${rng.pick(['\n', '\r'])}X-Smuggled: 1`;
    return 'one head line ended by a bare CR or LF';
  },
  badField: (m, rng) => {
    const form = rng.pick(FIELD_FORMS);
    m.fields.splice(rng.int(m.fields.length + 1), 0, form);
    return `field ${JSON.stringify(form)}`;
  },
  obsFold: (m, rng) => {
    if (m.fields.length === 0) m.fields.push('X-A: b');
    const i = rng.range(1, m.fields.length);
    m.fields.splice(i, 0, rng.pick([' folded', '\tfolded', '  ']));
    return 'obs-fold';
  },
  transferEncoding: (m, rng) => {
    m.fields = m.fields.filter((f) => !/^transfer-encoding:/i.test(f));
    const form = rng.pick(TE_FORMS);
    m.fields.push(`Transfer-Encoding: ${form}`);
    if (rng.chance(0.3)) m.fields.push(`Transfer-Encoding: ${rng.pick(TE_FORMS)}`);
    if (/chunked\s*$/i.test(form)) ensureChunk(m, rng);
    return `transfer-encoding ${JSON.stringify(form)}`;
  },
  contentLength: (m, rng) => {
    const form = rng.pick([...CL_FORMS, String(m.body.length), String(m.body.length + 1), String(Math.max(0, m.body.length - 1))]);
    if (rng.chance(0.5)) m.fields = m.fields.filter((f) => !/^content-length:/i.test(f));
    m.fields.push(`Content-Length: ${form}`);
    return `content-length ${JSON.stringify(form)}`;
  },
  bothFramings: (m, rng) => {
    ensureChunk(m, rng);
    m.fields.push(`Content-Length: ${rng.pick(['0', '5', String(m.body.length)])}`);
    return 'transfer-encoding and content-length';
  },
  truncate: (m) => {
    // Marked here, applied to the bytes (see `mutate`).
    m.excess = Buffer.from('\u0000TRUNCATE', 'latin1');
    return 'truncated';
  },
  excess: (m, rng) => {
    m.excess = rng.chance(0.5) ? Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', 'latin1') : rng.bytes(rng.range(1, 50));
    return 'excess bytes after the response';
  },
};

/** A generic byte-level change of the serialized response: set, insert or delete at a random point. */
function byteMutation(bytes: Buffer, rng: Rng): { bytes: Buffer; what: string } {
  if (bytes.length === 0) return { bytes, what: 'empty' };
  const at = rng.chance(0.6) ? rng.int(Math.min(bytes.length, 400)) : rng.int(bytes.length);
  const value = rng.pick([0x0d, 0x0a, 0x20, 0x09, 0x3a, 0x3b, 0x30, 0x46, 0x00, 0x7f, 0xff, 0x22, 0x2d, 0x2c, rng.int(256)]);
  switch (rng.int(3)) {
    case 0: {
      const b = Buffer.from(bytes);
      b[at] = value;
      return { bytes: b, what: `byte ${at} set to 0x${value.toString(16)}` };
    }
    case 1:
      return {
        bytes: Buffer.concat([bytes.subarray(0, at), Buffer.from([value]), bytes.subarray(at)]),
        what: `0x${value.toString(16)} inserted at ${at}`,
      };
    default:
      return { bytes: Buffer.concat([bytes.subarray(0, at), bytes.subarray(at + 1)]), what: `byte ${at} deleted` };
  }
}

interface Case {
  index: number;
  bytes: Buffer;
  /** Generated well-formed and unmutated: both clients must accept it with exactly `body`. */
  valid: boolean;
  body: Buffer;
  what: string[];
  /** Write boundaries (offsets into `bytes`) and whether to yield between writes. */
  splits: number[];
}

function makeCase(index: number, rng: Rng): Case {
  const m = validModel(rng);
  const what: string[] = [`${m.framing} ${m.body.length} bytes`];
  const valid = rng.chance(0.3);
  let truncate = false;
  if (!valid) {
    const names = Object.keys(MUTATIONS);
    for (let i = rng.chance(0.8) ? 1 : rng.range(2, 3); i > 0; i--) {
      const name = rng.pick(names);
      what.push(MUTATIONS[name]!(m, rng));
      if (name === 'truncate') {
        truncate = true;
        m.excess = Buffer.alloc(0);
      }
    }
  }
  let bytes = serialize(m);
  if (truncate) {
    const cut = rng.int(bytes.length);
    bytes = bytes.subarray(0, cut);
    what.push(`cut at ${cut} of ${serialize(m).length}`);
  }
  if (!valid && rng.chance(0.25)) {
    const changed = byteMutation(bytes, rng);
    bytes = changed.bytes;
    what.push(changed.what);
  }
  // Random write boundaries: most in the first few hundred bytes, where the head and first chunk lines are.
  const splits = new Set<number>();
  for (let i = rng.range(0, 6); i > 0; i--) splits.add(rng.chance(0.7) ? rng.int(Math.min(bytes.length, 300)) : rng.int(bytes.length));
  return { index, bytes, valid, body: m.body, what, splits: [...splits].filter((s) => s > 0).sort((a, b) => a - b) };
}

/** The first bytes of a response, with everything outside printable ASCII escaped. */
function printable(bytes: Buffer, max = 400): string {
  let s = '';
  for (const b of bytes.subarray(0, max))
    s +=
      b === 0x5c
        ? '\\\\'
        : b >= 0x20 && b < 0x7f
          ? String.fromCharCode(b)
          : b === 0x0d
            ? '\\r'
            : b === 0x0a
              ? '\\n'
              : `\\x${b.toString(16).padStart(2, '0')}`;
  return `"${s}"${bytes.length > max ? ` … (${bytes.length} bytes)` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// The two clients, against one loopback server that writes each case's bytes as planned.

interface Outcome {
  accepted: boolean;
  body: Buffer;
  error?: string;
}

async function serve(sock: Socket, c: Case): Promise<void> {
  sock.setNoDelay(true);
  let from = 0;
  for (const at of [...c.splits, c.bytes.length]) {
    if (at > from) {
      // Cork/uncork makes each piece one segment; a turn of the event loop between pieces lets the
      // client read them apart (or, when it is slower, together: both are wanted).
      sock.cork();
      sock.write(c.bytes.subarray(from, at));
      sock.uncork();
      from = at;
      await (c.index % 3 === 0 ? sleep(1) : new Promise((resolve) => setImmediate(resolve)));
    }
  }
  sock.end();
}

async function viaBulk(url: URL, path: string): Promise<Outcome> {
  // Timeouts far beyond any wait here (every response ends with a close): a loaded machine must not make a refusal.
  const client = new BulkHttpClient({ guard: permissive, connectTimeoutMs: 60_000, readTimeoutMs: 60_000 });
  try {
    const res = await client.request({ origin: url, path, method: 'GET', headers: {}, signal: new AbortController().signal });
    const chunks: Buffer[] = [];
    for await (const chunk of res.body) chunks.push(Buffer.from(chunk as Buffer));
    return { accepted: true, body: Buffer.concat(chunks) };
  } catch (err) {
    return { accepted: false, body: Buffer.alloc(0), error: `${(err as { code?: string }).code ?? ''} ${(err as Error).message}` };
  } finally {
    await client.close();
  }
}

/** node:http (llhttp): accepted when the response completed, whatever came after it on the socket. */
function viaNode(url: URL, path: string): Promise<Outcome> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let error: string | undefined;
    let complete = false;
    const req = httpGet({ host: url.hostname, port: url.port, path, agent: false, maxHeaderSize: 128 * 1024 }, (res) => {
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => {
        complete = res.complete;
      });
      res.on('error', (err) => (error ??= `${(err as { code?: string }).code ?? ''} ${err.message}`));
    });
    req.on('error', (err) => (error ??= `${(err as { code?: string }).code ?? ''} ${err.message}`));
    req.on('close', () => {
      // 'end' may come after the request's 'close' in the same turn: decide one turn later.
      setImmediate(() =>
        resolve(
          complete
            ? { accepted: true, body: Buffer.concat(chunks) }
            : { accepted: false, body: Buffer.alloc(0), error: error ?? 'incomplete' },
        ),
      );
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Divergences that are deliberate: each names the direction, the reason, and the responses it
// covers (decided from the bytes, not from either client's answer).

interface Allowed {
  id: string;
  /** Which client accepts while the other refuses. */
  accepts: 'node' | 'bulk';
  reason: string;
  covers(bytes: Buffer): boolean;
}

/** The heads in `bytes` (interim ones first), each as its status line and field lines, split leniently at LF. */
function headsOf(bytes: Buffer): { status: string; fields: string[] }[] {
  const lines = bytes
    .toString('latin1')
    .split('\n')
    .map((l) => l.replace(/\r$/, ''));
  const heads: { status: string; fields: string[] }[] = [];
  let at = 0;
  while (at < lines.length) {
    const end = lines.indexOf('', at);
    const head = { status: lines[at]!, fields: lines.slice(at + 1, end < 0 ? lines.length : end) };
    heads.push(head);
    // Another head follows an interim (1xx, not 101) response only.
    if (end < 0 || !/^\S+ 1\d\d/.test(head.status) || /^\S+ 101/.test(head.status)) break;
    at = end + 1;
  }
  return heads;
}

/** What follows the first blank line: the body (and trailers) of a response without interim heads. */
function afterHead(bytes: Buffer): string {
  const text = bytes.toString('latin1');
  const crlf = text.indexOf('\r\n\r\n');
  return crlf < 0 ? '' : text.slice(crlf + 4);
}

const TRAILER_LIKE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e]*\r?$/;

const ALLOWED: Allowed[] = [
  {
    id: 'status-line',
    accepts: 'node',
    reason:
      'the bulk client reads the status line of RFC 9112 §4 for HTTP/1.0 and HTTP/1.1 only, with a code of 100–999 and a reason phrase of ' +
      'visible characters, SP, HTAB and obs-text; llhttp also takes other version numbers (HTTP/0.9, HTTP/2.0), codes below 100 and DEL in the reason',
    covers: (bytes) => headsOf(bytes).some((h) => !/^HTTP\/1\.[01] [1-9]\d\d(?: [\t\x20-\x7e\x80-\xff]*)?$/.test(h.status)),
  },
  {
    id: 'transfer-coding',
    accepts: 'node',
    reason:
      'the bulk client reads one transfer coding, chunked, in one field; llhttp decodes chunked when it is the last coding and leaves the ' +
      'others to the application (or reads to the close when chunked is not last), which here would keep still-encoded bytes as the jar',
    covers: (bytes) => {
      const te = (headsOf(bytes).at(-1)?.fields ?? []).filter((f) => /^transfer-encoding:/i.test(f));
      return (
        te.length > 0 &&
        (te.length > 1 ||
          te[0]!
            .slice(te[0]!.indexOf(':') + 1)
            .trim()
            .toLowerCase() !== 'chunked')
      );
    },
  },
  {
    id: 'switching-protocols',
    accepts: 'node',
    reason: 'a 101 to a request that asked for no upgrade is refused; node:http takes it as the end of the response (no body)',
    covers: (bytes) => /^\S+ 101/.test(headsOf(bytes).at(-1)?.status ?? ''),
  },
  {
    id: 'line-bounds',
    accepts: 'node',
    reason:
      'a chunk-size line (extensions included) or a trailer field over 4 KiB, or trailer fields over 16 KiB in all, are refused, so that ' +
      'memory per response stays bounded; llhttp bounds neither (node:http bounds the head only)',
    covers: (bytes) => {
      const body = afterHead(bytes);
      if (/[\t\x20-\x7e]{4097,}/.test(body)) return true;
      return (
        body
          .split('\n')
          .filter((l) => TRAILER_LIKE.test(l))
          .reduce((n, l) => n + l.length + 1, 0) >
        16 * 1024
      );
    },
  },
  {
    id: 'empty-extension-name',
    accepts: 'node',
    reason: 'a chunk extension needs a name (RFC 9112 §7.1.1: a token); llhttp takes an empty one before `;` or `=`',
    covers: (bytes) => /(^|\n)[0-9A-Fa-f]+(;[^\r\n]*)?;[;=]/.test(afterHead(bytes)),
  },
];

// ---------------------------------------------------------------------------------------------

describe('the bulk client against llhttp (node:http), on random and mutated responses split at random reads', () => {
  let server: Server;
  let url: URL;
  const cases = new Map<string, Case>();
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    server = createServer((sock) => {
      sockets.add(sock);
      sock.on('close', () => sockets.delete(sock));
      sock.on('error', () => undefined);
      let pending = '';
      const onData = (d: Buffer) => {
        pending += d.toString('latin1');
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        sock.off('data', onData);
        sock.resume();
        const path = pending.slice(0, end).split(' ')[1] ?? '';
        const c = cases.get(path);
        if (c === undefined) return void sock.destroy();
        void serve(sock, c).catch(() => undefined);
      };
      sock.on('data', onData);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });

  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it(`${CASES} cases (seed ${SEED}): both accept or both refuse, and accepted bodies are the same bytes`, async () => {
    const rng = new Rng(SEED);
    const failures: string[] = [];
    const allowedSeen = new Map<string, number>();
    const tally = { validAccepted: 0, valid: 0, mutatedAccepted: 0, mutated: 0, bothRefused: 0 };
    const started = performance.now();
    let next = 0;
    const worker = async () => {
      while (next < CASES) {
        // Made in order, one at a time, between the other workers' waits: the same cases for a seed.
        const c = makeCase(next++, rng);
        if (ONLY !== undefined && c.index !== ONLY) continue;
        const path = `/case/${c.index}`;
        cases.set(path, c);
        const [bulk, node] = await Promise.all([viaBulk(url, path), viaNode(url, path)]);
        cases.delete(path);
        const describe = () =>
          `case ${c.index} (seed ${SEED}; ${c.what.join('; ')}; splits ${JSON.stringify(c.splits)}): bulk ${bulk.accepted ? `accepted ${bulk.body.length} bytes` : `refused (${bulk.error})`}, node ${node.accepted ? `accepted ${node.body.length} bytes` : `refused (${node.error})`}\n  bytes: ${printable(c.bytes)}`;
        if (c.valid) {
          tally.valid++;
          if (bulk.accepted && node.accepted && bulk.body.equals(c.body) && node.body.equals(c.body)) tally.validAccepted++;
          else failures.push(`a well-formed response was not accepted with its body by both: ${describe()}`);
          continue;
        }
        tally.mutated++;
        if (bulk.accepted && node.accepted) {
          tally.mutatedAccepted++;
          if (!bulk.body.equals(node.body)) failures.push(`both accepted, different bodies: ${describe()}`);
          continue;
        }
        if (!bulk.accepted && !node.accepted) {
          tally.bothRefused++;
          continue;
        }
        const accepts = bulk.accepted ? 'bulk' : 'node';
        const allowed = ALLOWED.find((a) => a.accepts === accepts && a.covers(c.bytes));
        if (allowed) allowedSeen.set(allowed.id, (allowedSeen.get(allowed.id) ?? 0) + 1);
        else failures.push(`only ${accepts} accepted: ${describe()}`);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    process.stderr.write(
      `\nbulk-http fuzz: seed ${SEED}, ${CASES} cases in ${seconds} s; well-formed ${tally.validAccepted}/${tally.valid} accepted by both; ` +
        `mutated ${tally.mutated}: both accepted ${tally.mutatedAccepted}, both refused ${tally.bothRefused}, allowed divergences ${JSON.stringify(Object.fromEntries(allowedSeen))}; failures ${failures.length}\n`,
    );
    if (process.env.FUZZ_DEBUG) process.stderr.write(`${failures.map((f) => f.split('\n')[0]).join('\n')}\n`);
    // Thrown rather than compared: a diff of many long strings takes jest minutes.
    if (failures.length > 0)
      throw new Error(
        `${failures.length} of ${CASES} cases failed (replay with FUZZ_SEED=${SEED}); the first:\n${failures.slice(0, 10).join('\n')}`,
      );
    // The accepting side is exercised: every well-formed case, and a fair share of the mutated ones.
    expect(tally.validAccepted).toBe(tally.valid);
    if (ONLY !== undefined) return;
    expect(tally.valid).toBeGreaterThan(CASES / 5);
    expect(tally.mutatedAccepted).toBeGreaterThan(tally.mutated / 20);
  }, 900_000); // about a minute on an idle machine; a loaded one may take several
});
