import { JobWatcher, type WatchedJobs } from '../../../src/cluster/job-watcher';
import { JobManagerClient } from '../../../src/cluster/jobmanager-client';
import { ManualClock } from '../../helpers/manual-clock';
import { type Origin, startOrigin } from '../../helpers/origin';
import { captureLogger } from '../../helpers/token-fakes';

const S = 1000;
const J1 = '11111111111111111111111111111111';
const J2 = '22222222222222222222222222222222';

/** A node:http JobManager whose /v1/jobs/overview answer each test sets. */
async function jobManager() {
  const state = { jobs: [] as { jid: string; state: string }[], status: 200, reads: 0 };
  const origin = await startOrigin((req, res) => {
    if (req.url === '/v1/jobs/overview') {
      state.reads++;
      res.writeHead(state.status, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          state.status === 200 ? { jobs: state.jobs.map((j) => ({ ...j, name: 'x' })) } : { errors: ['JobManager is starting'] },
        ),
      );
      return;
    }
    res.writeHead(404).end();
  });
  return { state, origin };
}

class Jobs implements WatchedJobs {
  readonly unregistered: { jobId: string; reason: string }[] = [];
  constructor(readonly ids: Set<string>) {}
  watchedJobs(): string[] {
    return [...this.ids];
  }
  async unregister(jobId: string, reason: string): Promise<void> {
    this.ids.delete(jobId);
    this.unregistered.push({ jobId, reason });
  }
}

/** With the absence hooks: an absent job's registration ends but is kept; listed again, it comes back. */
class JobsKeepingAbsent extends Jobs {
  readonly absentJobs: { jobId: string; reason: string }[] = [];
  readonly back: string[] = [];
  async absent(jobId: string, reason: string): Promise<void> {
    this.ids.delete(jobId);
    this.absentJobs.push({ jobId, reason });
  }
  async recheckAbsent(states: ReadonlyMap<string, string>): Promise<void> {
    for (const { jobId } of this.absentJobs) {
      if (states.get(jobId) === 'RUNNING' && !this.ids.has(jobId)) {
        this.ids.add(jobId);
        this.back.push(jobId);
      }
    }
  }
}

describe('job watcher (a node:http JobManager, an injected clock)', () => {
  let jm: { state: { jobs: { jid: string; state: string }[]; status: number; reads: number }; origin: Origin };
  let cluster: JobManagerClient;
  let clock: ManualClock;

  beforeEach(async () => {
    jm = await jobManager();
    cluster = new JobManagerClient({ baseUrl: jm.origin.url, requestTimeoutMs: 5000, runTimeoutMs: 5000 });
    clock = new ManualClock();
  });
  afterEach(async () => {
    await cluster.close();
    await jm.origin.close();
  });

  const watcher = (
    jobs: Jobs,
    overrides: Partial<{ missingReads: number; missingGraceMs: number; cluster: JobManagerClient; suspendedTimeoutMs: number }> = {},
  ) =>
    new JobWatcher({
      ...(overrides.suspendedTimeoutMs !== undefined ? { suspendedTimeoutMs: overrides.suspendedTimeoutMs } : {}),
      cluster: overrides.cluster ?? cluster,
      jobs,
      intervalMs: 5 * S,
      maxBackoffMs: 60 * S,
      missingReads: overrides.missingReads ?? 3,
      missingGraceMs: overrides.missingGraceMs ?? 60 * S,
      log: captureLogger().log,
      clock,
    });

  it('unregisters jobs in a globally terminal state (FINISHED, FAILED, CANCELED)', async () => {
    const ids = ['a', 'b', 'c', 'd'].map((c) => c.repeat(32));
    const jobs = new Jobs(new Set(ids));
    jm.state.jobs = [
      { jid: ids[0]!, state: 'FINISHED' },
      { jid: ids[1]!, state: 'FAILED' },
      { jid: ids[2]!, state: 'CANCELED' },
      { jid: ids[3]!, state: 'RUNNING' },
    ];
    await watcher(jobs).pollOnce();
    expect(jobs.unregistered).toEqual([
      { jobId: ids[0], reason: 'job FINISHED' },
      { jobId: ids[1], reason: 'job FAILED' },
      { jobId: ids[2], reason: 'job CANCELED' },
    ]);
    expect(jobs.watchedJobs()).toEqual([ids[3]]);
  });

  it('keeps SUSPENDED jobs (not globally terminal) and jobs on their way there', async () => {
    const jobs = new Jobs(new Set([J1, J2]));
    jm.state.jobs = [
      { jid: J1, state: 'SUSPENDED' },
      { jid: J2, state: 'CANCELLING' },
    ];
    const w = watcher(jobs);
    for (let i = 0; i < 5; i++) await w.pollOnce();
    expect(jobs.unregistered).toEqual([]);
  });

  it('counts a job as gone only after N successful reads without it AND the grace period', async () => {
    const jobs = new Jobs(new Set([J1]));
    jm.state.jobs = [];
    const w = watcher(jobs);
    await w.pollOnce(); // read 1 at t0
    await clock.advance(5 * S);
    await w.pollOnce(); // read 2
    await clock.advance(5 * S);
    await w.pollOnce(); // read 3, but only 10 s of the 60 s grace
    expect(jobs.unregistered).toEqual([]);
    await clock.advance(50 * S);
    await w.pollOnce(); // read 4 at 60 s
    expect(jobs.unregistered).toEqual([{ jobId: J1, reason: 'job missing from the JobManager' }]);
  });

  it('the grace period alone is not enough either: it also needs N reads', async () => {
    const jobs = new Jobs(new Set([J1]));
    const w = watcher(jobs);
    await w.pollOnce();
    await clock.advance(10 * 60 * S);
    await w.pollOnce();
    expect(jobs.unregistered).toEqual([]);
    await w.pollOnce();
    expect(jobs.unregistered).toHaveLength(1);
  });

  it('a job that shows up again starts its missing count afresh', async () => {
    const jobs = new Jobs(new Set([J1]));
    const w = watcher(jobs, { missingGraceMs: 0 });
    await w.pollOnce();
    await w.pollOnce();
    jm.state.jobs = [{ jid: J1, state: 'RUNNING' }];
    await w.pollOnce();
    jm.state.jobs = [];
    await w.pollOnce();
    await w.pollOnce();
    expect(jobs.unregistered).toEqual([]);
    await w.pollOnce();
    expect(jobs.unregistered).toHaveLength(1);
  });

  it('an unreachable or failing JobManager never counts as gone, and reads back off', async () => {
    const jobs = new Jobs(new Set([J1]));
    jm.state.status = 503;
    const w = watcher(jobs, { missingGraceMs: 0, missingReads: 1 });
    const delays: number[] = [];
    for (let i = 0; i < 6; i++) {
      delays.push(await w.pollOnce());
      await clock.advance(120 * S);
    }
    expect(delays).toEqual([10 * S, 20 * S, 40 * S, 60 * S, 60 * S, 60 * S]);
    // Now the port is closed altogether: connection refused.
    const down = new JobManagerClient({ baseUrl: jm.origin.url, requestTimeoutMs: 2000, runTimeoutMs: 2000 });
    await jm.origin.close();
    const w2 = watcher(jobs, { missingGraceMs: 0, missingReads: 1, cluster: down });
    for (let i = 0; i < 3; i++) await w2.pollOnce();
    await down.close();
    expect(jobs.unregistered).toEqual([]);
    expect(jobs.watchedJobs()).toEqual([J1]);
    // Once it answers again, the interval is back to normal.
    const jm2 = await jobManager();
    const back = new JobManagerClient({ baseUrl: jm2.origin.url, requestTimeoutMs: 2000, runTimeoutMs: 2000 });
    jm2.state.jobs = [{ jid: J1, state: 'RUNNING' }];
    expect(await watcher(jobs, { cluster: back }).pollOnce()).toBe(5 * S);
    await back.close();
    await jm2.origin.close();
  });

  it('polls on its timer only while jobs are registered, and stops with the gateway', async () => {
    const jobs = new Jobs(new Set());
    const w = watcher(jobs);
    w.start();
    await clock.advance(20 * S);
    expect(jm.state.reads).toBe(0); // nothing registered: no reads at all
    jobs.ids.add(J1);
    jm.state.jobs = [{ jid: J1, state: 'RUNNING' }];
    const tick = async () => {
      await clock.advance(5 * S);
      await w.whenIdle();
    };
    await tick();
    await tick();
    expect(jm.state.reads).toBe(2);
    jm.state.jobs = [{ jid: J1, state: 'FINISHED' }];
    await tick();
    expect(jobs.unregistered).toEqual([{ jobId: J1, reason: 'job FINISHED' }]);
    await w.stop();
    jobs.ids.add(J2);
    await clock.advance(60 * S);
    expect(jm.state.reads).toBe(3);
    expect(clock.pending()).toEqual([]);
  });

  it("ends a SUSPENDED job's registration after Flink's job-leader timeout (kept for its return); RUNNING again, it comes back", async () => {
    const jobs = new JobsKeepingAbsent(new Set([J1]));
    const w = watcher(jobs, { suspendedTimeoutMs: 300 * S });
    jm.state.jobs = [{ jid: J1, state: 'SUSPENDED' }];
    await w.pollOnce();
    await clock.advance(300 * S - 1);
    await w.pollOnce();
    expect(jobs.absentJobs).toEqual([]);
    await clock.advance(1);
    await w.pollOnce();
    expect(jobs.absentJobs).toEqual([{ jobId: J1, reason: 'job SUSPENDED past the job-leader timeout' }]);
    expect(jobs.unregistered).toEqual([]);
    jm.state.jobs = [{ jid: J1, state: 'RUNNING' }];
    await w.pollOnce();
    expect(jobs.back).toEqual([J1]);
  });

  it('a job missing past the grace ends its registration through absent (kept), not unregister', async () => {
    const jobs = new JobsKeepingAbsent(new Set([J1]));
    const w = watcher(jobs, { missingReads: 1, missingGraceMs: 0 });
    jm.state.jobs = [];
    await w.pollOnce();
    expect(jobs.absentJobs.map((j) => j.jobId)).toEqual([J1]);
    expect(jobs.unregistered).toEqual([]);
  });
});
