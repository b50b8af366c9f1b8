import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { distributionHome } from './flink-dist';
import { FLINK_JAVA17_OPENS } from './java-client';
import { runProcess } from './run-process';

/** Flink's Java 17 opens, as one `env.java.opts.all` value. */
const OPENS = FLINK_JAVA17_OPENS.join(' ');

export interface CapturedSubmission {
  /** The whole multipart body of POST /v1/jobs as Flink's client sent it. */
  body: Buffer;
  contentType: string;
  /** The serialised job graph (the part `jobGraphFileName` names). */
  graph: Buffer;
  /** The job id the CLI printed after the recorder's 202. */
  jobId: string | undefined;
  cliOutput: string;
}

/** The parts of a multipart body (test-sized, in memory): name, filename, content. */
export function multipartParts(body: Buffer, contentType: string): { name: string; filename?: string; content: Buffer }[] {
  const boundary = /boundary=("?)([^";]+)\1/i.exec(contentType)?.[2];
  if (!boundary) throw new Error(`no boundary in ${contentType}`);
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: { name: string; filename?: string; content: Buffer }[] = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(delimiter, start);
    if (next < 0) break;
    const part = body.subarray(start + 2, next - 2);
    const split = part.indexOf('\r\n\r\n');
    const head = part.subarray(0, split).toString('latin1');
    const name = /name="([^"]*)"/i.exec(head)?.[1] ?? '';
    const filename = /filename="([^"]*)"/i.exec(head)?.[1];
    parts.push({ name, ...(filename !== undefined ? { filename } : {}), content: part.subarray(split + 4) });
    at = next;
  }
  return parts;
}

/**
 * Runs `flink run -d <jar>` of Flink `version`'s own distribution (its bin/flink, so its own
 * client serialises the job graph) against a node:http recorder that answers POST /v1/jobs with
 * Flink's 202, and returns what the client sent. `dynamic` become `-D key=value` options.
 */
export async function captureJobGraph(
  version: string,
  jar: string,
  dynamic: Record<string, string>,
  args: string[] = [],
): Promise<CapturedSubmission> {
  const home = distributionHome(version);
  const dir = mkdtempSync(join(tmpdir(), `gw-graph-${version}-`));
  let captured: { body: Buffer; contentType: string } | undefined;
  let answeredId = '';
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && /\/jobs\/?$/.test(req.url ?? '')) {
        const body = Buffer.concat(chunks);
        captured = { body, contentType: String(req.headers['content-type']) };
        const parts = multipartParts(body, captured.contentType);
        const request = JSON.parse(parts.find((p) => p.name === 'request')?.content.toString() ?? '{}') as {
          jobGraphFileName?: string;
          executionPlanFileName?: string;
        };
        const graph = parts.find((p) => p.filename === (request.executionPlanFileName ?? request.jobGraphFileName))?.content;
        answeredId = graph ? 'ffffffffffffffffffffffffffffffff' : '';
        res.writeHead(202, { 'content-type': 'application/json; charset=UTF-8' });
        res.end(JSON.stringify({ jobUrl: `/jobs/${answeredId}` }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify({ errors: ['Not found'] }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    for (const sub of ['conf', 'log', 'lib']) mkdirSync(join(dir, sub), { recursive: true });
    for (const f of readdirSync(join(home, 'conf')))
      if (/^log4j-cli/.test(f)) writeFileSync(join(dir, 'conf', f), readFileSync(join(home, 'conf', f)));
    const { port } = server.address() as AddressInfo;
    writeFileSync(
      join(dir, 'conf', version.startsWith('1.') ? 'flink-conf.yaml' : 'config.yaml'),
      `rest.address: 127.0.0.1\nrest.port: ${port}\nparallelism.default: 1\nenv.java.opts.all: ${version.startsWith('1.') ? OPENS : JSON.stringify(OPENS)}\n`,
    );
    const env = {
      ...StandaloneCluster.scriptEnv(home, dir),
      FLINK_LIB_DIR: join(home, 'lib'),
      JVM_ARGS: '-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1',
    };
    const dArgs = Object.entries(dynamic).map(([k, v]) => `-D${k}=${v}`);
    const r = await runProcess('bash', [join(home, 'bin', 'flink'), 'run', '-d', '-m', `127.0.0.1:${port}`, ...dArgs, jar, ...args], {
      env,
      timeoutMs: 180_000,
      cwd: dir,
    });
    const cliOutput = `${r.stdout}\n${r.stderr}`;
    if (!captured) throw new Error(`Flink ${version}'s CLI sent no job graph: ${cliOutput.slice(-3000)}`);
    const parts = multipartParts(captured.body, captured.contentType);
    const request = JSON.parse(parts.find((p) => p.name === 'request')?.content.toString() ?? '{}') as {
      jobGraphFileName?: string;
      executionPlanFileName?: string;
    };
    const graph = parts.find((p) => p.filename === (request.executionPlanFileName ?? request.jobGraphFileName))?.content;
    if (!graph) throw new Error(`no job graph part in the body Flink ${version} sent`);
    return { ...captured, graph, jobId: /JobID ([0-9a-f]{32})/.exec(cliOutput)?.[1], cliOutput };
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
