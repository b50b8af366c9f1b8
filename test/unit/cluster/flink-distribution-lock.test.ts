import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { DistributionUnavailableError, ensureFlinkDistribution } from '../../../src/cluster/flink-distribution';

const log = pino({ level: 'silent' });

/** Two test files (or gateways) that want one Flink version at once: one assembles, the other waits. */
describe('assembling a Flink distribution: one process at a time per version', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-dist-lock-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('waits while another live process assembles, then uses what it published', () => {
    const lock = join(dir, '.assembling-flink-9.9.9');
    mkdirSync(lock);
    // The "other process": alive (it is the shell below), publishing after a second.
    const other = spawn(
      'bash',
      [
        '-c',
        `sleep 1.2; mkdir -p '${join(dir, 'flink-9.9.9')}' && touch '${join(dir, 'flink-9.9.9', '.flink-jar-gateway-assembled')}'; sleep 5`,
      ],
      { stdio: 'ignore' },
    );
    writeFileSync(join(lock, 'pid'), String(other.pid));
    try {
      const started = Date.now();
      expect(ensureFlinkDistribution({ version: '9.9.9', cacheDir: dir, python: '/nonexistent/python', log })).toBe(
        join(dir, 'flink-9.9.9'),
      );
      expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
      expect(existsSync(lock)).toBe(true); // not ours to release
    } finally {
      other.kill('SIGKILL');
    }
  });

  it('takes over the lock of a process that died, and releases it whatever happens', () => {
    const lock = join(dir, '.assembling-flink-9.9.8');
    mkdirSync(lock);
    writeFileSync(join(lock, 'pid'), '2147483646');
    expect(() => ensureFlinkDistribution({ version: '9.9.8', cacheDir: dir, python: '/nonexistent/python', log })).toThrow(
      DistributionUnavailableError,
    );
    expect(existsSync(lock)).toBe(false);
  });
});
