import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { startOrigin } from '../helpers/origin';
import { Agent, request } from 'undici';
import { startGatewayProcess } from '../helpers/gateway-process';
import { PROCESS_TIMEOUT_MS, runProcess } from '../helpers/run-process';

// Runs the built CLI (npm test builds dist/ first), as a user would.
const root = projectRoot(__dirname);
const bin = join(root, 'bin', 'flink-jar-gateway.js');

describe('the command line', () => {
  it('refuses a Node older than 24 with one line', async () => {
    const systemNode = '/usr/bin/node';
    const major = existsSync(systemNode)
      ? Number(execFileSync(systemNode, ['-p', 'process.versions.node.split(".")[0]']).toString().trim())
      : 99;
    if (major >= 24) {
      // Nothing older to try here; the check itself is a plain comparison in bin/.
      expect(major).toBeGreaterThanOrEqual(24);
      return;
    }
    const r = await runProcess(systemNode, [bin, '--help'], { timeoutMs: PROCESS_TIMEOUT_MS });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/needs Node\.js 24 or newer, but this is v\d+/);
  });

  it('prints the options from the registry with --help', async () => {
    const r = await runProcess(process.execPath, [bin, '--help'], { timeoutMs: PROCESS_TIMEOUT_MS });
    expect(r.status).toBe(0);
    expect(r.stdout).toContain('gateway.cluster.rest-url');
    expect(r.stdout).toContain('rest.port');
  });

  it('reports every configuration problem at once and exits 2', async () => {
    const r = await runProcess(process.execPath, [bin, '-Drest.port=high', '-Dgateway.upload.max-size=lots'], {
      timeoutMs: PROCESS_TIMEOUT_MS,
    });
    expect(r.status).toBe(2);
    expect(r.stderr).toContain('2 problems');
    expect(r.stderr).toContain('rest.port');
    expect(r.stderr).toContain('gateway.upload.max-size');
  });

  it('says in one line what to do when Java is missing (a run-time failure: exit 1, with its code)', async () => {
    const r = await runProcess(process.execPath, [bin, '-Dgateway.embedded.java=/nonexistent/java', '-Drest.port=0'], {
      timeoutMs: PROCESS_TIMEOUT_MS,
    });
    expect(r.status).toBe(1);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/^flink-jar-gateway: GW_EMBEDDED_UNAVAILABLE: .*needs Java 17\+.*gateway\.cluster\.rest-url/);
  });

  it('exits 1 with GW_LISTEN_FAILED when the port is taken (the configuration was fine)', async () => {
    const taken = await startOrigin((_req, res) => res.end());
    try {
      const origin = await startOrigin((_req, res) => res.end('{}'));
      try {
        const r = await runProcess(
          process.execPath,
          [bin, `-Dgateway.cluster.rest-url=${origin.url}`, `-Drest.port=${new URL(taken.url).port}`],
          { timeoutMs: PROCESS_TIMEOUT_MS },
        );
        expect(r.status).toBe(1);
        expect(r.stderr).toMatch(/^flink-jar-gateway: GW_LISTEN_FAILED: .*EADDRINUSE/m);
      } finally {
        await origin.close();
      }
    } finally {
      await taken.close();
    }
  });

  it('fronts an existing JobManager, warns about secrets on the command line without printing them, and drains on SIGTERM', async () => {
    const origin = await startOrigin((_req, res) => res.end('{}'));
    const gw = await startGatewayProcess([
      `-Dgateway.cluster.rest-url=${origin.url}`,
      '-Drest.port=0',
      '-Ds3.access-key=AKIDCLI',
      '-Ds3.secret-key=cli-secret-987',
    ]);
    try {
      expect((await fetch(`${gw.url}/gateway/v1/health`)).status).toBe(200);
      expect(await gw.stop()).toBe(0);
      expect(gw.output()).toContain('a sensitive option was given with -D');
      expect(gw.output()).not.toContain('cli-secret-987');
    } finally {
      gw.kill();
      await origin.close();
    }
  });
});

describe('graceful drain on SIGTERM', () => {
  it('finishes the request in flight, closes keep-alive connections at once, and exits promptly', async () => {
    // (Without the drain sweep, the kept-alive connection would hold the process for its 65 s idle timeout.)
    let slowArrived: () => void = () => undefined;
    const arrived = new Promise<void>((resolve) => (slowArrived = resolve));
    const origin = await startOrigin((req, res) => {
      if (req.url?.includes('slow')) slowArrived();
      const delay = req.url?.includes('slow') ? 1500 : 0;
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'), delay);
    });
    const gw = await startGatewayProcess([`-Dgateway.cluster.rest-url=${origin.url}`, '-Drest.port=0']);
    const agent = new Agent({ keepAliveTimeout: 60_000 });
    try {
      const url = gw.url;
      // A kept-alive connection, then a slow request in flight when SIGTERM arrives.
      await (await request(`${url}/v1/overview`, { dispatcher: agent })).body.dump();
      const slow = request(`${url}/v1/slow`, { dispatcher: agent });
      await arrived; // in flight: the JobManager stand-in has it (not a fixed wait a busy machine may outlast)
      const exit = gw.stop();
      const res = await slow;
      expect(res.statusCode).toBe(200);
      await res.body.dump();
      expect(await exit).toBe(0);
    } finally {
      gw.kill();
      await agent.close();
      await origin.close();
    }
  });
});

/**
 * Runs the gateway with `args` (fronting a JobManager that is never called, so nothing starts when
 * the configuration is refused) and expects exit 2 with GW_CONFIG_INVALID and one line per problem;
 * returns the problem lines.
 */
async function refused(args: string[]): Promise<string[]> {
  const r = await runProcess(process.execPath, [bin, '-Dgateway.cluster.rest-url=http://127.0.0.1:9', '-Drest.port=0', ...args], {
    timeoutMs: PROCESS_TIMEOUT_MS,
  });
  const lines = r.stderr.trimEnd().split('\n');
  expect({ status: r.status, first: lines[0] }).toEqual({
    status: 2,
    first: expect.stringMatching(/^flink-jar-gateway: GW_CONFIG_INVALID: invalid configuration \(\d+ problems?\):$/),
  });
  const problems = lines.slice(1);
  expect(lines[0]).toContain(`(${problems.length} problem`);
  for (const line of problems) expect(line).toMatch(/^ {2}- \S+ \(from [^)]+\): \S.*$/);
  return problems;
}

describe('every start-up check goes through the options registry: exit 2, GW_CONFIG_INVALID, one line per problem', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'fjg-cli-'));
    writeFileSync(join(dir, 'not-a-cert.pem'), 'hello\n');
    writeFileSync(join(dir, 'not-a-key.pem'), 'world\n');
    writeFileSync(join(dir, 'tokens'), 'just-a-name\n');
    mkdirSync(join(dir, 'open-cache'));
    chmodSync(join(dir, 'open-cache'), 0o777);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a half S3 key pair names the missing key (fs-plugin rule, was S3Settings)', async () => {
    const problems = await refused(['-Ds3.access-key=AKIDONLY', '-Dfs.s3a.bucket.jars.secret.key=half-secret-123']);
    expect(problems).toEqual([
      expect.stringMatching(/^ {2}- s3\.secret-key \(from not set\): set both s3\.access-key and s3\.secret-key/),
      expect.stringMatching(/^ {2}- fs\.s3a\.bucket\.jars\.access\.key \(from not set\): set both/),
    ]);
    expect(problems.join('\n')).not.toContain('half-secret-123');
  });

  it('URL-valued options share one url type: rest-url, s3.endpoint, the Azure endpoint, provider endpoints', async () => {
    const problems = await refused([
      '-Dgateway.cluster.rest-url=localhost:8081',
      '-Ds3.endpoint=ftp://minio:9000',
      '-Dfs.azure.account.endpoint.acct=http://user:pw@127.0.0.1:10000/acct',
      '-Dsecurity.delegation.token.provider.s3.endpoint=http://sts.example.com',
    ]);
    expect(problems).toEqual([
      expect.stringMatching(/^ {2}- gateway\.cluster\.rest-url \(from -D\): 'localhost:8081' is not an absolute URL/),
      expect.stringMatching(/^ {2}- s3\.endpoint \(from -D\): must be a http:\/\/ or https:\/\/ URL, not ftp:/),
      expect.stringMatching(/^ {2}- fs\.azure\.account\.endpoint\.acct \(from -D\): must not carry user info/),
      expect.stringMatching(/^ {2}- security\.delegation\.token\.provider\.s3\.endpoint \(from -D\): must use https:\/\//),
    ]);
    expect(problems.join('\n')).not.toContain('pw@');
  });

  it("a token provider's options: half a client, a bad scope, an account key that is not base64 (was exit 1 from init)", async () => {
    const p = 'security.delegation.token.provider';
    const problems = await refused([
      `-D${p}.oauth2.token-endpoint=https://idp.example.com/token`,
      `-D${p}.oauth2.scope=a"b`,
      `-D${p}.azure-blob.account-name=acct`,
      `-D${p}.azure-blob.account-key=not base64 secret!`,
    ]);
    expect(problems).toEqual([
      expect.stringMatching(new RegExp(`^ {2}- ${p}\\.oauth2\\.scope \\(from -D\\): 'a"b' is not a valid scope token$`)),
      expect.stringMatching(new RegExp(`^ {2}- ${p}\\.azure-blob\\.account-key \\(from -D\\): is not a base64 account key`)),
      expect.stringMatching(new RegExp(`^ {2}- ${p}\\.oauth2\\.client-id \\(from not set\\): must be set together with`)),
      expect.stringMatching(new RegExp(`^ {2}- ${p}\\.oauth2\\.client-secret \\(from not set\\): must be set together with`)),
    ]);
    expect(problems.join('\n')).not.toContain('base64 secret!');
  });

  it('permission entries and permissions without authentication (were plain Errors, exit 1)', async () => {
    expect(await refused(['-Dgateway.auth.permission.submit=ci'])).toEqual([
      expect.stringMatching(/^ {2}- gateway\.auth\.permission\.submit \(from -D\): 'ci' is not a principal/),
    ]);
    expect(await refused(['-Dgateway.auth.permission.cancel=token:ops'])).toEqual([
      expect.stringMatching(/^ {2}- gateway\.auth\.permission\.cancel \(from -D\): names principals, but no authentication is configured/),
    ]);
  });

  it('shared-dir hand-off without web.upload.dir (was a plain Error in jar-handoff.ts, exit 1)', async () => {
    expect(await refused(['-Dgateway.artifacts.handoff=shared-dir'])).toEqual([
      expect.stringMatching(/^ {2}- gateway\.artifacts\.handoff \(from -D\): shared-dir needs web\.upload\.dir/),
    ]);
  });

  it('TLS: half pairs, unreadable files and unusable PEM (were exceptions after composition, exit 1)', async () => {
    expect(
      await refused([`-Dgateway.tls.cert=${join(dir, 'not-a-cert.pem')}`, `-Dgateway.cluster.key=${join(dir, 'not-a-key.pem')}`]),
    ).toEqual([
      expect.stringMatching(/^ {2}- gateway\.tls\.key \(from not set\): gateway\.tls\.cert and gateway\.tls\.key go together/),
      expect.stringMatching(/^ {2}- gateway\.cluster\.cert \(from not set\): gateway\.cluster\.cert and gateway\.cluster\.key go together/),
    ]);
    expect(
      await refused([
        `-Dgateway.tls.cert=${join(dir, 'missing.pem')}`,
        `-Dgateway.tls.key=${join(dir, 'not-a-key.pem')}`,
        `-Dgateway.cluster.ca=${join(dir, 'not-a-cert.pem')}`,
      ]),
    ).toEqual([
      expect.stringMatching(/^ {2}- gateway\.tls\.cert \(from -D\): cannot read .*missing\.pem \(ENOENT\)/),
      expect.stringMatching(/^ {2}- gateway\.cluster\.ca \(from -D\): cannot be used: /),
    ]);
  });

  it("jar URIs on a non-loopback address without authentication (was main.ts's own check, without a code)", async () => {
    expect(await refused(['-Drest.bind-address=0.0.0.0', '-Dweb.submit.jar-uri.enable=true'])).toEqual([
      expect.stringMatching(/^ {2}- rest\.bind-address \(from -D\): refusing to start: rest\.bind-address is 0\.0\.0\.0/),
    ]);
  });

  it('fs-plugin checks that ran in create(): local-file dirs, HTTP header names', async () => {
    expect(await refused(['-Dgateway.artifacts.local-file.enabled=true'])).toEqual([
      expect.stringMatching(/^ {2}- gateway\.artifacts\.local-file\.allowed-dirs \(from not set\): required when/),
    ]);
    expect(
      await refused([
        '-Dgateway.artifacts.local-file.enabled=true',
        '-Dgateway.artifacts.local-file.allowed-dirs=relative',
        '-Duser.artifacts.http-headers=Bad Header:x',
      ]),
    ).toEqual([
      expect.stringMatching(/^ {2}- gateway\.artifacts\.local-file\.allowed-dirs \(from -D\): 'relative' is not an absolute path$/),
      expect.stringMatching(/^ {2}- user\.artifacts\.http-headers \(from -D\): 'Bad Header' is not a valid header name$/),
    ]);
    // The rule that resolves the directories runs once their syntax is right.
    expect(
      await refused(['-Dgateway.artifacts.local-file.enabled=true', `-Dgateway.artifacts.local-file.allowed-dirs=${join(dir, 'gone')}`]),
    ).toEqual([
      expect.stringMatching(/^ {2}- gateway\.artifacts\.local-file\.allowed-dirs \(from -D\): '.*gone' cannot be resolved \(ENOENT\)$/),
    ]);
  });

  it('files and directories options name: the tokens file, a state directory others may write (were exit 1)', async () => {
    expect(
      await refused([
        `-Dgateway.auth.tokens-file=${join(dir, 'no-such-tokens')}`,
        `-Dgateway.artifacts.cache-dir=${join(dir, 'open-cache')}`,
      ]),
    ).toEqual([
      expect.stringMatching(/^ {2}- gateway\.auth\.tokens-file \(from -D\): cannot read .*\(ENOENT\)/),
      expect.stringMatching(/^ {2}- gateway\.artifacts\.cache-dir \(from -D\): .*open-cache is writable by every user/),
    ]);
    expect(await refused([`-Dgateway.auth.tokens-file=${join(dir, 'tokens')}`])).toEqual([
      expect.stringMatching(/^ {2}- gateway\.auth\.tokens-file \(from -D\): .+/),
    ]);
  });

  it('problems from different places are reported together', async () => {
    const problems = await refused([
      '-Drest.port=high',
      '-Ds3.access-key=AKIDONLY',
      '-Dgateway.auth.permission.read=bob',
      '-Dgateway.artifacts.handoff=shared-dir',
      '-Dsecurity.delegation.token.provider.s3.secret-key=sk-123456',
    ]);
    expect(problems.map((l) => /^ {2}- (\S+)/.exec(l)![1]).sort()).toEqual(
      [
        'gateway.artifacts.handoff',
        'gateway.auth.permission.read',
        'rest.port',
        's3.secret-key',
        'security.delegation.token.provider.s3.access-key',
      ].sort(),
    );
  });

  it('a bad command-line argument is a configuration problem too', async () => {
    const r = await runProcess(process.execPath, [bin, '--no-such-flag'], { timeoutMs: PROCESS_TIMEOUT_MS });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(
      /^flink-jar-gateway: GW_CONFIG_INVALID: invalid configuration \(1 problem\):\n {2}- --no-such-flag \(from command line\): unknown argument/,
    );
  });
});
