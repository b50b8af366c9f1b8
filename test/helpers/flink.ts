import { randomBytes } from 'node:crypto';
import { openAsBlob, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { FormData, getGlobalDispatcher, request } from 'undici';
import { projectRoot } from '../../src/project-root';

/**
 * Flink's own WordCount example (`org.apache.flink:flink-examples-streaming:2.3.0:WordCount`; no 2.1.x
 * build is published), fetched from Maven Central by the embedded-flink build.
 */
export const WORDCOUNT_JAR = join(projectRoot(__dirname), 'embedded-flink', 'target', 'test-jars', 'WordCount.jar');
export const WORDCOUNT_CLASS = 'org.apache.flink.streaming.examples.wordcount.WordCount';

/** The gateway error code at the start of a Flink-envelope answer (`GW_…`), or '' when there is none. */
export function errorCode(r: { body: Record<string, unknown> }): string {
  return String((r.body.errors as string[] | undefined)?.[0] ?? '').split(':')[0]!;
}

export function newJobId(): string {
  return randomBytes(16).toString('hex');
}

export async function uploadFile(
  baseUrl: string,
  path: string,
  name: string,
  field = 'jarfile',
): Promise<{ status: number; body: Record<string, unknown> }> {
  const form = new FormData();
  form.append(field, await openAsBlob(path), name);
  const res = await request(`${baseUrl}/jars/upload`, { method: 'POST', body: form });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

export async function uploadBytes(
  baseUrl: string,
  files: { name: string; bytes: Buffer; field?: string }[],
  fields: Record<string, string> = {},
  headers: Record<string, string> = {},
) {
  const form = new FormData();
  for (const [k, v] of Object.entries(fields)) form.append(k, v);
  for (const f of files) form.append(f.field ?? 'jarfile', new Blob([f.bytes]), f.name);
  const res = await request(`${baseUrl}/jars/upload`, { method: 'POST', body: form, headers });
  return { status: res.statusCode, body: (await res.body.json()) as Record<string, unknown> };
}

/**
 * A JSON call with the path sent exactly as written: WHATWG URL parsing would turn `%2e%2e` into a
 * dot segment and remove it, hiding what the gateway must handle.
 */
export async function json(
  method: string,
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown>; headers: Record<string, unknown> }> {
  const m = /^(https?:\/\/[^/]+)(\/.*)$/.exec(url);
  if (!m) throw new Error(`bad url ${url}`);
  const res = await getGlobalDispatcher().request({
    origin: m[1]!,
    path: m[2]!,
    method: method as 'GET',
    headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.body.text();
  return { status: res.statusCode, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

/** Polls a job through `baseUrl` until it reaches one of `states`. */
export async function waitForJobState(
  baseUrl: string,
  jobId: string,
  states: string[],
  timeoutMs = 90_000,
  headers: Record<string, string> = {},
): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let last = 'unknown';
  while (Date.now() < deadline) {
    const r = await json('GET', `${baseUrl}/v1/jobs/${jobId}`, undefined, headers);
    if (r.status === 200) {
      last = String(r.body.state);
      if (states.includes(last)) {
        if (last === 'FAILED') await printFailure(baseUrl, jobId, headers);
        return last;
      }
    }
    await new Promise((res) => setTimeout(res, 250));
  }
  throw new Error(`job ${jobId} did not reach ${states.join('/')} within ${timeoutMs} ms (last state ${last})`);
}

/** A failed job's root exception on stderr, so a test that did not expect FAILED says why. */
export async function printFailure(baseUrl: string, jobId: string, headers: Record<string, string> = {}): Promise<void> {
  const r = await json('GET', `${baseUrl}/v1/jobs/${jobId}/exceptions`, undefined, headers).catch(() => undefined);
  // Flink 1.x: root-exception; 2.x: only exceptionHistory.
  const body = r?.body as
    | { 'root-exception'?: string; exceptionHistory?: { entries?: { stacktrace?: string; exceptionName?: string }[] } }
    | undefined;
  const first = body?.exceptionHistory?.entries?.[0];
  const root = String(body?.['root-exception'] ?? first?.stacktrace ?? first?.exceptionName ?? 'no exception reported');
  const lines = root.split('\n');
  // The first line and the chain of causes (the frames say little).
  const causes = [lines[0], ...lines.filter((l) => l.trim().startsWith('Caused by:')).slice(0, 8)];
  process.stderr.write(`job ${jobId} FAILED: ${causes.join('\n  ')}\n`);
}

/** Every file name under the JobManager's upload directory (to prove nothing was left behind). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(e.name);
    }
  };
  try {
    walk(dir);
  } catch {
    /* missing dir: nothing there */
  }
  return out;
}
