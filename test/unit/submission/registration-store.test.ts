import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileRegistrationStore } from '../../../src/submission/registration-store';
import { captureLogger } from '../../helpers/token-fakes';

const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';

describe('job-registration store', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'gw-reg-store-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const rec = (jobId: string) => ({
    jobId,
    configuration: { 'parallelism.default': '2' },
    provenance: {},
    registeredAt: '2026-01-01T00:00:00.000Z',
  });

  it('persists through a temporary file and a rename, readable by the next process, owner-only', async () => {
    const a = new FileRegistrationStore(join(dir, 'nested', 'store'), captureLogger().log);
    await a.init();
    await Promise.all([a.put(rec(J1)), a.put(rec(J2))]);
    await a.remove(J1);
    expect(readdirSync(a.dir)).toEqual(['registrations.json']); // no temporary file left
    expect(statSync(a.file).mode & 0o777).toBe(0o600);
    const b = new FileRegistrationStore(a.dir, captureLogger().log);
    await b.init();
    expect(b.list()).toEqual([rec(J2)]);
    expect(JSON.parse(readFileSync(a.file, 'utf8'))).toEqual({ version: 1, jobs: [rec(J2)] });
  });

  it('coalesces concurrent writes and every caller sees its change on disk', async () => {
    const s = new FileRegistrationStore(dir, captureLogger().log);
    await s.init();
    const ids = Array.from({ length: 20 }, (_, i) => i.toString(16).padStart(32, '0'));
    await Promise.all(ids.map((id) => s.put(rec(id))));
    const onDisk = JSON.parse(readFileSync(s.file, 'utf8')) as { jobs: { jobId: string }[] };
    expect(onDisk.jobs.map((j) => j.jobId)).toEqual(ids);
  });

  it('moves an unreadable file aside, logs an error and starts empty', async () => {
    writeFileSync(join(dir, 'registrations.json'), '{"version":1,"jobs":[{"jobId":');
    const cap = captureLogger();
    const s = new FileRegistrationStore(dir, cap.log);
    await s.init();
    expect(s.list()).toEqual([]);
    expect(readdirSync(dir).some((f) => f.startsWith('registrations.json.corrupt-'))).toBe(true);
    expect(cap.messages('error')[0]).toMatch(/unreadable; moved aside/);
  });
});
