import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort } from '../../src/cluster/process-group';
import { KubernetesClient } from '../../src/ha/kubernetes-client';
import { issueCert, makeTestCa } from './tls';

/** The versions scripts/build-kube.sh builds (test-setup.sh runs it). */
export const KUBE_VERSION = '1.37.2';

/** Where scripts/build-kube.sh put the binaries. */
export function kubeBinDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'flink-jar-gateway', 'kube', `v${KUBE_VERSION}`);
}

/** Whether the binaries are there (a suite that needs them fails with this reason when they are not). */
export function kubeBinaries(): { apiserver: string; etcd: string } {
  const dir = kubeBinDir();
  const bins = { apiserver: join(dir, 'kube-apiserver'), etcd: join(dir, 'etcd') };
  if (!existsSync(bins.apiserver) || !existsSync(bins.etcd)) {
    throw new Error(
      `kube-apiserver and etcd are not built in ${dir}: run \`bash scripts/build-kube.sh\` (npm test's set-up does; the first build takes about a quarter of an hour)`,
    );
  }
  return bins;
}

export interface KubeUser {
  name: string;
  groups?: string[];
}

/** A started process in its own group, its output in a file. */
interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
}

function spawnGroup(bin: string, args: string[], logFile: string, env: NodeJS.ProcessEnv): Proc {
  const out = openSync(logFile, 'a', 0o600);
  const child = spawn(bin, args, { detached: true, stdio: ['ignore', out, out], env });
  closeSync(out);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  return { child, exited };
}

async function killGroup(p: Proc | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!p?.child.pid || p.child.exitCode !== null || p.child.signalCode !== null) return;
  try {
    process.kill(-p.child.pid, signal);
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-p.child.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }, 5_000);
  await p.exited;
  clearTimeout(timer);
}

/** The environment without etcd's flag variables (etcd reads every ETCD_* as a flag). */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ETCD_')));
}

async function waitFor(what: string, proc: Proc, logFile: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null)
      throw new Error(`${what} exited before it was ready:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} not ready within ${timeoutMs} ms:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/**
 * A real kube-apiserver on a real etcd, on loopback, as the project's tests run them: TLS with a
 * certificate from a throwaway CA (openssl), static token users, RBAC authorisation, anonymous
 * access off, ephemeral ports; each in its own process group, torn down with it. No kubelet: pods
 * never run, ConfigMaps, Leases, RBAC objects and CRDs behave as on any cluster.
 */
export class KubeApiServer {
  readonly url: string;
  readonly caPem: string;
  readonly adminToken: string;
  private readonly tokens = new Map<string, string>();
  private etcd: Proc | undefined;
  private apiserver: Proc | undefined;
  private readonly agent: Agent;

  private constructor(
    readonly dir: string,
    private readonly ports: { etcd: number; peer: number; api: number },
    private readonly args: string[],
  ) {
    this.url = `https://127.0.0.1:${ports.api}`;
    this.caPem = readFileSync(join(dir, 'kube-ca.pem'), 'utf8');
    this.adminToken = readFileSync(join(dir, 'admin.token'), 'utf8');
    for (const line of readFileSync(join(dir, 'tokens.csv'), 'utf8').split('\n').filter(Boolean)) {
      const [token, name] = line.split(',');
      this.tokens.set(name!, token!);
    }
    this.agent = new Agent({ connect: { ca: this.caPem } });
  }

  /** Starts etcd and the API server with `users` (plus `admin`, in system:masters) as token users. */
  static async start(opts: { users?: KubeUser[] } = {}): Promise<KubeApiServer> {
    const bins = kubeBinaries();
    const dir = mkdtempSync(join(tmpdir(), 'gw-kube-'));
    const ca = makeTestCa(dir, 'kube');
    const serving = issueCert(dir, ca, 'apiserver', { cn: 'kube-apiserver', use: 'server', altNames: 'DNS:localhost,IP:127.0.0.1' });
    // Service account tokens are signed with this key (required flags, though no pod runs here).
    execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', join(dir, 'sa.key')], {
      stdio: 'pipe',
    });
    execFileSync('openssl', ['pkey', '-in', join(dir, 'sa.key'), '-pubout', '-out', join(dir, 'sa.pub')], { stdio: 'pipe' });
    const users: KubeUser[] = [{ name: 'admin', groups: ['system:masters'] }, ...(opts.users ?? [])];
    const lines = users.map((u, i) => `${randomBytes(24).toString('hex')},${u.name},uid-${i},"${(u.groups ?? []).join(',')}"`);
    writeFileSync(join(dir, 'tokens.csv'), `${lines.join('\n')}\n`, { mode: 0o600 });
    writeFileSync(join(dir, 'admin.token'), lines[0]!.split(',')[0]!, { mode: 0o600 });
    const ports = { etcd: await freePort(), peer: await freePort(), api: await freePort() };
    mkdirSync(join(dir, 'certs'));
    const args = [
      `--etcd-servers=http://127.0.0.1:${ports.etcd}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${ports.api}`,
      // Without it the endpoint reconciler refuses 127.0.0.1 and the server exits.
      '--endpoint-reconciler-type=none',
      `--tls-cert-file=${serving.cert}`,
      `--tls-private-key-file=${serving.key}`,
      `--client-ca-file=${ca.cert}`,
      `--token-auth-file=${join(dir, 'tokens.csv')}`,
      '--anonymous-auth=false',
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${join(dir, 'sa.pub')}`,
      `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
      '--service-cluster-ip-range=10.96.0.0/16',
      `--cert-dir=${join(dir, 'certs')}`,
      '--profiling=false',
    ];
    const server = new KubeApiServer(dir, ports, args);
    try {
      await server.startEtcd(bins.etcd);
      await server.startApiServer(bins.apiserver);
    } catch (err) {
      await server.stop();
      throw err;
    }
    return server;
  }

  private async startEtcd(bin: string): Promise<void> {
    const { etcd, peer } = this.ports;
    const log = join(this.dir, 'etcd.log');
    this.etcd = spawnGroup(
      bin,
      [
        '--name=test',
        `--data-dir=${join(this.dir, 'etcd-data')}`,
        `--listen-client-urls=http://127.0.0.1:${etcd}`,
        `--advertise-client-urls=http://127.0.0.1:${etcd}`,
        `--listen-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${peer}`,
        `--initial-cluster=test=http://127.0.0.1:${peer}`,
        // Throwaway data on a shared, loaded disk: no fsync.
        '--unsafe-no-fsync',
      ],
      log,
      cleanEnv(),
    );
    await waitFor(
      'etcd',
      this.etcd,
      log,
      async () => {
        const res = await request(`http://127.0.0.1:${etcd}/health`);
        return res.statusCode === 200 && (await res.body.text()).includes('"true"');
      },
      60_000,
    );
  }

  /** Starts the API server (again, on the same port and etcd: an outage that ends). */
  async startApiServer(bin = kubeBinaries().apiserver): Promise<void> {
    const log = join(this.dir, 'kube-apiserver.log');
    this.apiserver = spawnGroup(bin, this.args, log, cleanEnv());
    await waitFor(
      'kube-apiserver',
      this.apiserver,
      log,
      async () => {
        const res = await request(`${this.url}/readyz`, {
          dispatcher: this.agent,
          headers: { authorization: `Bearer ${this.adminToken}` },
        });
        await res.body.text();
        return res.statusCode === 200;
      },
      120_000,
    );
  }

  /** Stops the API server only (etcd keeps the data): an outage. */
  async stopApiServer(): Promise<void> {
    await killGroup(this.apiserver);
    this.apiserver = undefined;
  }

  async stop(): Promise<void> {
    await killGroup(this.apiserver);
    await killGroup(this.etcd);
    await this.agent.close().catch(() => undefined);
    rmSync(this.dir, { recursive: true, force: true });
  }

  token(user: string): string {
    const t = this.tokens.get(user);
    if (!t) throw new Error(`no token user ${user}`);
    return t;
  }

  /** A client of the project's own Kubernetes client, as `user` (default admin). */
  client(user = 'admin'): KubernetesClient {
    return new KubernetesClient({ server: this.url, ca: this.caPem, token: this.token(user), source: `test user ${user}` });
  }

  /** A kubeconfig for `user` (what `kubernetes.config.file` names), written into the server's dir. */
  kubeconfig(user: string, namespace = 'default'): string {
    const file = join(this.dir, `kubeconfig-${user}.yaml`);
    const doc = [
      'apiVersion: v1',
      'kind: Config',
      'current-context: test',
      'clusters:',
      '- name: test',
      '  cluster:',
      `    server: ${this.url}`,
      `    certificate-authority-data: ${Buffer.from(this.caPem).toString('base64')}`,
      'users:',
      `- name: ${user}`,
      '  user:',
      `    token: ${this.token(user)}`,
      'contexts:',
      '- name: test',
      '  context:',
      '    cluster: test',
      `    user: ${user}`,
      `    namespace: ${namespace}`,
      '',
    ].join('\n');
    writeFileSync(file, doc, { mode: 0o600 });
    return file;
  }

  /** An admin call to the API (namespaces, RBAC objects, CRDs): the JSON answer, throwing on an error status. */
  async api(
    method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
    path: string,
    body?: unknown,
    query = '',
  ): Promise<{ status: number; body: unknown }> {
    const res = await request(`${this.url}${path}${query}`, {
      method,
      dispatcher: this.agent,
      headers: {
        authorization: `Bearer ${this.adminToken}`,
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.body.text();
    return { status: res.statusCode, body: text ? (JSON.parse(text) as unknown) : undefined };
  }

  async createNamespace(name: string): Promise<void> {
    const r = await this.api('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
    if (r.status !== 201 && r.status !== 409) throw new Error(`cannot create namespace ${name}: ${JSON.stringify(r.body)}`);
  }

  /** A Role with `verbs` on ConfigMaps in `namespace`, bound to `user`. */
  async grantConfigMaps(namespace: string, user: string, verbs: readonly string[]): Promise<void> {
    const name = `${user}-configmaps`;
    const role = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace },
      rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: [...verbs] }],
    };
    const binding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    };
    for (const [kind, obj] of [
      ['roles', role],
      ['rolebindings', binding],
    ] as const) {
      const r = await this.api('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/${kind}`, obj);
      if (r.status === 409) await this.api('PUT', `/apis/rbac.authorization.k8s.io/v1/namespaces/${namespace}/${kind}/${name}`, obj);
      else if (r.status !== 201) throw new Error(`cannot create ${kind} ${name}: ${JSON.stringify(r.body)}`);
    }
  }
}
