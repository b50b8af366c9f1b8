import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, statSync } from 'node:fs';
import { get as httpGet, type IncomingMessage, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { type GatewayProcess, startGatewayProcess } from '../helpers/gateway-process';
import { type Origin, startOrigin } from '../helpers/origin';
import { type ProcessResult, runProcess } from '../helpers/run-process';
import { kubernetesExample } from './example-sidecar';

// `npm run build` (unless dist/ is current) → `npm pack` → `npm install --omit=dev <tarball>` into an
// empty directory → run the installed bin, the way a user of the package would. npm itself runs on
// Node 24 here (the system npm's CLI started with this Node), so engine checks see the runtime the
// package is for. Every child runs asynchronously: the fake JobManager in this process must keep
// answering while the gateway talks to it.

const root = projectRoot(__dirname);
const node24Dir = dirname(process.execPath);
const systemNode = '/usr/bin/node';

/** The npm CLI script behind the `npm` on PATH (e.g. /usr/lib/node_modules/npm/bin/npm-cli.js). */
function npmCli(): string {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'npm');
    if (!dir || dir.includes('node_modules') || !existsSync(candidate)) continue;
    const real = realpathSync(candidate);
    if (real.endsWith('.js')) return real;
    const beside = join(dirname(real), 'npm-cli.js');
    if (existsSync(beside)) return beside;
  }
  return '/usr/lib/node_modules/npm/bin/npm-cli.js';
}

/** The environment of a child: no npm_* settings inherited from an outer `npm run`, Node 24 first on PATH. */
function childEnv(pathDirs: string[]): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  env.PATH = pathDirs.join(delimiter);
  return env;
}

const npmEnv = () => childEnv([node24Dir, ...(process.env.PATH ?? '').split(delimiter)]);
const npm = (args: string[], cwd: string, timeoutMs: number): Promise<ProcessResult> =>
  runProcess(process.execPath, [npmCli(), ...args], { cwd, env: npmEnv(), timeoutMs });

/**
 * Whether dist/ holds a compiled file newer than every source of tsconfig.build.json (src/, fs-plugins/).
 * `npm test` builds before jest starts; rebuilding then would rewrite dist/ under suites that run the
 * CLI from it at the same time.
 */
function distIsCurrent(): boolean {
  const sources = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
    );
  return [...sources('src'), ...sources('fs-plugins')].every((ts) => {
    const js = join(root, 'dist', ts.replace(/\.ts$/, '.js'));
    return existsSync(js) && statSync(js).mtimeMs >= statSync(join(root, ts)).mtimeMs;
  });
}

function expectOk(r: ProcessResult, what: string): void {
  if (r.status !== 0) throw new Error(`${what} failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
}

/** A GET over HTTPS with the given CA and optional client certificate; a fresh connection each time. */
function httpsGet(url: string, tls: { ca: string; cert?: string; key?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { ...tls, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (d: string) => (body += d));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.once('error', reject);
    req.end();
  });
}

let work: string;
let app: string;
let bin: string;
let packed: { filename: string; files: { path: string }[] };
let install: ProcessResult;

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'fjg-pack-'));
  if (!distIsCurrent()) expectOk(await npm(['run', 'build', '--silent'], root, 90_000), 'npm run build');
  expect(distIsCurrent()).toBe(true);
  const pack = await npm(['pack', '--pack-destination', work, '--json', '--silent'], root, 60_000);
  expectOk(pack, 'npm pack');
  packed = (JSON.parse(pack.stdout) as (typeof packed)[])[0]!;
  app = join(work, 'app');
  mkdirSync(app);
  // --prefer-offline: the packages are in npm's cache after the project's own `npm ci`.
  install = await npm(['install', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline', join(work, packed.filename)], app, 120_000);
  expectOk(install, 'npm install of the tarball');
  bin = join(app, 'node_modules', '.bin', 'flink-jar-gateway');
}, 240_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('npm pack', () => {
  it('ships the compiled gateway and plugins, the bin, docs and the embedded-flink sources, and nothing else', () => {
    const files = packed.files.map((f) => f.path);
    for (const f of [
      'package.json',
      'README.md',
      'bin/flink-jar-gateway.js',
      'dist/src/main.js',
      'dist/fs-plugins/index.js',
      'docs/configuration.md',
      'openapi.yaml',
      'embedded-flink/pom.xml',
    ]) {
      expect(files).toContain(f);
    }
    // The embedded cluster (and the token bridge it loads) build from these sources with Maven on first
    // start, as from a checkout.
    for (const dir of ['embedded-flink/src/main/java/', 'token-bridge/src/main/java/'])
      expect(files.filter((f) => f.startsWith(dir)).length).toBeGreaterThan(0);
    expect(files).toContain('token-bridge/pom.xml');
    const unexpected = files.filter(
      (f) =>
        /^(src|fs-plugins|test|bench|examples|node_modules|\.tmp|\.ci)\//.test(f) ||
        /^(embedded-flink|token-bridge)\/target\//.test(f) ||
        f.startsWith('token-bridge/src/test/') ||
        /\.(ts|map)$/.test(f),
    );
    expect(unexpected).toEqual([]);
  });

  it('installs into an empty directory with Node 24 and only the runtime dependencies', () => {
    expect(install.stderr).not.toContain('EBADENGINE');
    const pkg = JSON.parse(readFileSync(join(app, 'node_modules', 'flink-jar-gateway', 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    for (const dep of Object.keys(pkg.dependencies))
      expect({ dep, installed: existsSync(join(app, 'node_modules', dep)) }).toEqual({ dep, installed: true });
    expect(existsSync(join(app, 'node_modules', 'typescript'))).toBe(false);
    expect(existsSync(join(app, 'node_modules', 'jest'))).toBe(false);
  });

  it('`flink-jar-gateway --help` with Node 24 on PATH prints the options of the registry, plugins included', async () => {
    const r = await runProcess(bin, ['--help'], { cwd: app, env: childEnv([node24Dir, '/usr/bin', '/bin']), timeoutMs: 30_000 });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    for (const key of [
      'gateway.cluster.rest-url',
      'rest.port',
      'web.submit.jar-uri.enable',
      's3.access-key',
      'user.artifacts.http-headers',
    ])
      expect(r.stdout).toContain(key);
  });

  it('with an older Node first on PATH it fails with one line', async () => {
    const major = existsSync(systemNode)
      ? Number(execFileSync(systemNode, ['-p', 'process.versions.node.split(".")[0]']).toString().trim())
      : 24;
    if (major >= 24) {
      // No older Node on this machine; bin/'s check is a plain comparison, covered by the CLI test.
      expect(major).toBeGreaterThanOrEqual(24);
      return;
    }
    const r = await runProcess(bin, ['--help'], { cwd: app, env: childEnv([dirname(systemNode), '/bin']), timeoutMs: 30_000 });
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/needs Node\.js 24 or newer, but this is v\d+/);
  });

  describe('the installed gateway in front of a JobManager', () => {
    let jm: Origin;
    const children: GatewayProcess[] = [];
    const seen: { url: string; authorization?: string }[] = [];
    /** The JobManager holds GET /v1/jobs/overview?slow=<id> until released; `arrived` resolves once it is held. */
    const held = new Map<string, { arrive: () => void; gate: Promise<void>; release: () => void }>();
    const hold = (id: string): { arrived: Promise<void>; release: () => void } => {
      let arrive: () => void = () => undefined;
      let release: () => void = () => undefined;
      const arrived = new Promise<void>((r) => (arrive = r));
      const gate = new Promise<void>((r) => (release = r));
      held.set(id, { arrive, gate, release });
      return { arrived, release };
    };

    beforeAll(async () => {
      jm = await startOrigin((req: IncomingMessage, res: ServerResponse) => {
        seen.push({ url: req.url ?? '', ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}) });
        const json = (body: unknown) => {
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(body));
        };
        const slow = /^\/v1\/jobs\/overview\?slow=(\w+)$/.exec(req.url ?? '');
        if (slow) {
          const h = held.get(slow[1]!);
          h?.arrive();
          void (h?.gate ?? Promise.resolve()).then(() => json({ jobs: [] }));
          return;
        }
        if (req.url === '/config' || req.url === '/v1/config') return json({ 'flink-version': '2.1.3', features: { 'web-submit': true } });
        json(req.url?.includes('jobs/overview') ? { jobs: [] } : {});
      });
    });

    afterAll(async () => {
      for (const h of held.values()) h.release();
      for (const c of children) c.kill();
      await jm?.close();
    });

    /** Starts the installed bin with Node 24 first on PATH, from the clean directory; resolves when it prints its URL. */
    async function startGateway(
      args: string[] = [`-Dgateway.artifacts.cache-dir=${join(work, `cache-${children.length}`)}`],
      env: Record<string, string> = {},
    ): Promise<GatewayProcess> {
      const gw = await startGatewayProcess([...args, `-Dgateway.cluster.rest-url=${jm.url}`, '-Drest.port=0'], {
        bin,
        cwd: app,
        env: { ...childEnv([node24Dir, '/usr/bin', '/bin']), ...env },
        timeoutMs: 30_000,
      });
      children.push(gw);
      return gw;
    }

    /** A GET through the gateway to the held JobManager route, on its own connection (Connection: close). */
    function slowGet(url: string, id: string): Promise<{ status: number; body: string }> {
      return new Promise((resolve, reject) => {
        httpGet(`${url}/v1/jobs/overview?slow=${id}`, { agent: false }, (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => (body += d));
          res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
        }).once('error', reject);
      });
    }

    it("answers health and the operator's startup probe (GET /config, no credentials), and drains in-flight requests on SIGTERM", async () => {
      const gw = await startGateway();
      const health = await fetch(`${gw.url}/gateway/v1/health`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: 'UP' });
      // What the operator's startup probe sends: plain GET /config on the REST port, no Authorization.
      const config = await fetch(`${gw.url}/config`);
      expect(config.status).toBe(200);
      expect(await config.json()).toEqual({ 'flink-version': '2.1.3', features: { 'web-submit': true } });
      expect(seen.some((r) => r.url === '/config' && r.authorization === undefined)).toBe(true);
      expect((await fetch(`${gw.url}/gateway/v1/ready`)).status).toBe(200);

      // A pass-through request the JobManager holds, then SIGTERM: the gateway waits for it, then exits 0.
      const { arrived, release } = hold('a');
      const inFlight = slowGet(gw.url, 'a');
      await arrived;
      const exited = gw.stop();
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(gw.child.exitCode).toBeNull();
      release();
      expect(await inFlight).toEqual({ status: 200, body: '{"jobs":[]}' });
      expect(await exited).toBe(0);
      expect(gw.output()).toContain('draining');
    }, 60_000);

    it("runs the Kubernetes example's configuration: HTTPS, probes without credentials, the operator by client certificate", async () => {
      // One gateway, without the example's Kubernetes API server: gateway.ha.store local here (the
      // example's store and two gateways run in k8s-example-upload-run.test.ts and test/ha/).
      const example = kubernetesExample(join(work, 'k8s'));
      const gw = await startGateway([...example.args, '-Dgateway.ha.store=local'], example.env);
      let exited: Promise<number | null> | undefined;
      try {
        expect(gw.url).toMatch(/^https:/);
        const get = (path: string, client?: { cert: string; key: string }) => httpsGet(`${gw.url}${path}`, { ca: example.ca, ...client });
        // The startup probe (GET /config) and the sidecar's own probes: no credentials. An anonymous
        // caller cannot submit, so the dashboard's web-submit feature is off for it.
        expect(await get('/config')).toEqual({
          status: 200,
          body: JSON.stringify({ 'flink-version': '2.1.3', features: { 'web-submit': false } }),
        });
        expect((await get('/gateway/v1/ready')).status).toBe(200);
        // Everything else needs the operator's client certificate (or a bearer token).
        expect((await get('/v1/jobs/overview')).status).toBe(401);
        expect(await get('/v1/jobs/overview', example.operator)).toEqual({ status: 200, body: '{"jobs":[]}' });
      } finally {
        exited = gw.stop();
      }
      expect(await exited).toBe(0);
    }, 60_000);
  });
});
