import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { projectRoot } from '../../src/project-root';
import { runProcess } from '../helpers/run-process';
import { buildJar } from '../helpers/jars';

export interface NetnsCase {
  name: string;
  uri: string;
  expect: 'refused' | 'fetched';
  status: number;
  code?: string;
  message: string;
}

export interface NetnsReport {
  cases: NetnsCase[];
  trapConnections: { meta4: number; meta6: number };
  publicRequests: string[];
}

const ROOT = projectRoot(__dirname);

/** Whether this test run may make a network namespace (root, `ip netns`) and has a built gateway. */
export function netnsAvailable(): { ok: boolean; reason: string } {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'not root' };
  if (!existsSync(join(ROOT, 'dist', 'src', 'main.js'))) return { ok: false, reason: 'dist/ is missing (npm run build)' };
  const name = `gwprobe-${randomBytes(3).toString('hex')}`;
  try {
    execFileSync('ip', ['netns', 'add', name], { stdio: 'pipe' });
    execFileSync('ip', ['netns', 'del', name], { stdio: 'pipe' });
    return { ok: true, reason: '' };
  } catch (err) {
    return { ok: false, reason: `ip netns does not work here (${(err as Error).message.split('\n')[0]})` };
  }
}

/**
 * Makes a network namespace whose loopback also carries 169.254.169.254, fd00:ec2::254 and a
 * "public" 1.2.3.4 (no other interface, no route out: nothing leaves the namespace), with its own
 * /etc/hosts (ip netns exec bind-mounts /etc/netns/<name>/hosts), runs the probe in it, and removes
 * both again.
 */
export async function runNetnsProbe(): Promise<NetnsReport> {
  const name = `gwssrf-${randomBytes(3).toString('hex')}`;
  const etc = join('/etc/netns', name);
  const work = mkdtempSync(join(tmpdir(), 'gw-netns-'));
  const ip = (...args: string[]) => execFileSync('ip', ['netns', 'exec', name, 'ip', ...args], { stdio: 'pipe' });
  try {
    execFileSync('ip', ['netns', 'add', name], { stdio: 'pipe' });
    ip('link', 'set', 'lo', 'up');
    ip('addr', 'add', '169.254.169.254/32', 'dev', 'lo');
    ip('addr', 'add', '1.2.3.4/32', 'dev', 'lo');
    ip('-6', 'addr', 'add', 'fd00:ec2::254/128', 'dev', 'lo');
    mkdirSync(etc, { recursive: true });
    writeFileSync(
      join(etc, 'hosts'),
      [
        '127.0.0.1 localhost',
        '::1 localhost',
        '169.254.169.254 metadata.test',
        'fd00:ec2::254 metadata6.test',
        '1.2.3.4 public.test',
        '1.2.3.4 rebind.test',
        '1.2.3.4 both.test',
        '169.254.169.254 both.test',
        '',
      ].join('\n'),
    );
    // Unknown names must fail inside the namespace, not be asked of the host's resolver.
    writeFileSync(join(etc, 'resolv.conf'), 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n');
    const jar = join(work, 'app.jar');
    writeFileSync(jar, buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\n', 'a.txt': 'netns' }));
    const probe = join(__dirname, 'netns-ssrf-probe.cjs');
    const r = await runProcess('ip', ['netns', 'exec', name, process.execPath, probe, ROOT, '/etc/hosts', work, jar], {
      timeoutMs: 90_000,
    });
    const line = /NETNS_REPORT (.*)/.exec(r.stdout)?.[1];
    if (r.status !== 0 || line === undefined) throw new Error(`netns probe failed (exit ${r.status}):\n${r.stdout}\n${r.stderr}`);
    return JSON.parse(line) as NetnsReport;
  } finally {
    try {
      execFileSync('ip', ['netns', 'del', name], { stdio: 'pipe' });
    } catch {
      /* never made */
    }
    rmSync(etc, { recursive: true, force: true });
    rmSync(work, { recursive: true, force: true });
  }
}
