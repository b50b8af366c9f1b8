import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileTokenReceiver, type JobTokenFile } from '../../../src/tokens/receivers/file-receiver';
import { bytes, captureLogger } from '../../helpers/token-fakes';

const JOB_A = 'a'.repeat(32);
const JOB_B = 'b'.repeat(32);
const payload = (jobs: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  bytes(JSON.stringify({ version: 1, ...extra, jobs }));

describe('file receiver (gateway.tokens.file-receiver.dir)', () => {
  let root: string;
  let dir: string;
  let logs: ReturnType<typeof captureLogger>;
  let receiver: FileTokenReceiver;
  const fileOf = (jobId: string) => join(dir, `${jobId}.json`);
  const read = (jobId: string) => JSON.parse(readFileSync(fileOf(jobId), 'utf8')) as JobTokenFile;

  beforeEach(async () => {
    root = mkdtempSync(join(tmpdir(), 'gw-file-receiver-'));
    dir = join(root, 'tokens');
    logs = captureLogger();
    receiver = new FileTokenReceiver({ dir, log: logs.log, now: () => Date.UTC(2026, 0, 1) });
    await receiver.init();
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('writes one versioned file per registered job, mode 0600, in a 0700 directory', async () => {
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    await receiver.jobRegistering(JOB_A);
    await receiver.update('s3', payload({ [JOB_A]: { sessionToken: 'S-A' }, [JOB_B]: { sessionToken: 'S-B' } }, { region: 'eu-west-1' }));
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'O-A' } }));
    expect(read(JOB_A)).toEqual({
      version: 1,
      jobId: JOB_A,
      updatedAt: '2026-01-01T00:00:00.000Z',
      tokens: { s3: { sessionToken: 'S-A' }, oauth2: { accessToken: 'O-A' } },
      context: { s3: { region: 'eu-west-1' } },
    });
    expect(statSync(fileOf(JOB_A)).mode & 0o777).toBe(0o600);
    // JOB_B is in a payload but not registered here: no file.
    expect(readdirSync(dir).sort()).toEqual([`${JOB_A}.json`]);
  });

  it('replaces the file atomically (a new inode, no temporary file left), and only when the content changes', async () => {
    await receiver.jobRegistering(JOB_A);
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'one' } }));
    const first = statSync(fileOf(JOB_A)).ino;
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'one' } }));
    expect(statSync(fileOf(JOB_A)).ino).toBe(first);
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'two' } }));
    expect(statSync(fileOf(JOB_A)).ino).not.toBe(first);
    expect(read(JOB_A).tokens).toEqual({ oauth2: { accessToken: 'two' } });
    expect(readdirSync(dir)).toEqual([`${JOB_A}.json`]);
  });

  it('writes a job registered after its tokens arrived (a restart registers it again)', async () => {
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'early' } }));
    expect(readdirSync(dir)).toEqual([]);
    await receiver.jobRegistering(JOB_A.toUpperCase());
    expect(read(JOB_A).tokens).toEqual({ oauth2: { accessToken: 'early' } });
  });

  it('removes the file when the job is unregistered, and a late payload cannot bring it back', async () => {
    await receiver.jobRegistering(JOB_A);
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'x' } }));
    await receiver.jobUnregistered(JOB_A, 'unregistered');
    expect(readdirSync(dir)).toEqual([]);
    // A cycle that was in flight while the job was unregistered.
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'x2' } }));
    expect(readdirSync(dir)).toEqual([]);
    // Unregistering again (idempotent) or a job that never had a file is fine.
    await receiver.jobUnregistered(JOB_A, 'unregistered');
    await receiver.jobUnregistered(JOB_B, 'unregistered');
  });

  it('keeps the file when the manager session ends (gateway shutdown): the job may still run', async () => {
    await receiver.jobRegistering(JOB_A);
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'x' } }));
    await receiver.jobUnregistered(JOB_A, 'session-end');
    expect(readdirSync(dir)).toEqual([`${JOB_A}.json`]);
    // The next gateway process drops the job at start when it ended meanwhile: the file goes.
    const next = new FileTokenReceiver({ dir, log: logs.log });
    await next.init();
    await next.jobUnregistered(JOB_A, 'unregistered');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('removes the file when the job vanishes from every payload, and ignores payloads not addressed by job', async () => {
    await receiver.jobRegistering(JOB_A);
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'x' } }));
    await receiver.update('opaque', bytes('not json'));
    expect(Object.keys(read(JOB_A).tokens)).toEqual(['oauth2']);
    await receiver.update('oauth2', payload({}));
    expect(readdirSync(dir)).toEqual([]);
  });

  it('never turns a job id that is not 32 hex characters into a file name', async () => {
    await receiver.jobRegistering('../../etc/passwd');
    await receiver.update('oauth2', payload({ '../../etc/passwd': { accessToken: 'x' } }));
    await receiver.jobUnregistered('../../etc/passwd', 'unregistered');
    expect(readdirSync(dir)).toEqual([]);
    expect(readdirSync(root)).toEqual(['tokens']);
  });

  it('logs a failed write without any token value and writes on the next update', async () => {
    rmSync(dir, { recursive: true });
    writeFileSync(dir, 'not a directory');
    await receiver.jobRegistering(JOB_A);
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'SECRET-VALUE-1' } }));
    expect(logs.messages('error')).toEqual(['file receiver: cannot update the job token files']);
    rmSync(dir);
    await receiver.init();
    await receiver.update('oauth2', payload({ [JOB_A]: { accessToken: 'SECRET-VALUE-2' } }));
    expect(read(JOB_A).tokens).toEqual({ oauth2: { accessToken: 'SECRET-VALUE-2' } });
    expect(JSON.stringify(logs.lines)).not.toContain('SECRET-VALUE');
  });
});
