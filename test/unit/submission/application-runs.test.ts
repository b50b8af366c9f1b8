import pino from 'pino';
import { JobManagerClient } from '../../../src/cluster/jobmanager-client';
import { ApplicationRuns } from '../../../src/submission/application-runs';
import type { JobRegistrar } from '../../../src/submission/job-registrations';
import { type Origin, startOrigin } from '../../helpers/origin';

const APP = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';
const FIRST = '11111111111111111111111111111111';
const LATER = '22222222222222222222222222222222';

/** A node:http JobManager: its configuration (HA or not) and one application's status and jobs. */
async function jobManager(conf: Record<string, string>) {
  const app = { status: 'RUNNING', jobs: [FIRST] as string[], known: true };
  let configReads = 0;
  const origin = await startOrigin((req, res) => {
    req.resume();
    const send = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json; charset=UTF-8' });
      res.end(JSON.stringify(body));
    };
    if (req.url === '/v1/jobmanager/config') {
      configReads++;
      return send(
        200,
        Object.entries(conf).map(([key, value]) => ({ key, value })),
      );
    }
    if (req.url === `/v1/applications/${APP}`) {
      if (!app.known) return send(404, { errors: ['Application not found'] });
      return send(200, { id: APP, name: 'multi', status: app.status, jobs: app.jobs.map((jid) => ({ jid, name: jid, state: 'RUNNING' })) });
    }
    send(404, { errors: ['Not found'] });
  });
  return { origin, app, configReads: () => configReads };
}

/** Records what the application's jobs were registered with. */
class RecordingRegistrar implements JobRegistrar {
  readonly registered: { jobId: string; configuration: Readonly<Record<string, string>>; principal: string | undefined }[] = [];
  readonly known = new Set<string>();
  async register(jobId: string, configuration: Readonly<Record<string, string>>, _log: unknown, principal?: string): Promise<void> {
    this.registered.push({ jobId, configuration, principal });
    this.known.add(jobId);
  }
  async rollback(): Promise<void> {}
  submitted(): void {}
  isKnown(jobId: string): boolean {
    return this.known.has(jobId);
  }
  async unregister(_jobId: string, _reason: string): Promise<void> {}
}

describe('Flink 2.3 applications (ApplicationRuns, a node:http JobManager)', () => {
  let origin: Origin | undefined;
  let runs: ApplicationRuns | undefined;
  const log = pino({ level: 'silent' });
  afterEach(async () => {
    await runs?.close();
    await origin?.close();
    runs = undefined;
    origin = undefined;
  });

  const start = async (conf: Record<string, string>, registrations?: JobRegistrar) => {
    const jm = await jobManager(conf);
    origin = jm.origin;
    const cluster = new JobManagerClient({ baseUrl: jm.origin.url, requestTimeoutMs: 5000, runTimeoutMs: 5000 });
    runs = new ApplicationRuns({ cluster, ...(registrations ? { registrations } : {}), intervalMs: 3_600_000, log });
    return { jm, runs };
  };

  it('with HA on the cluster, the job id is the application id, as Flink fixes it; the configuration is read once', async () => {
    const { jm, runs } = await start({ 'high-availability.type': 'zookeeper' });
    expect(await runs.idsFor({ applicationId: APP })).toEqual({ jobId: APP, applicationId: APP, rule: 'ha-application-id' });
    const chosen = await runs.idsFor({});
    expect(chosen.jobId).toBe(chosen.applicationId);
    expect(chosen.jobId).toMatch(/^[0-9a-f]{32}$/);
    expect(chosen.rule).toBe('ha-application-id');
    // A job id the request fixes wins, as in Flink (its fixed job id is set before the HA rule looks).
    expect(await runs.idsFor({ jobId: FIRST, applicationId: APP })).toEqual({ jobId: FIRST, applicationId: APP, rule: 'request' });
    expect(jm.configReads()).toBe(1);
  });

  it("with Flink's older HA key too (high-availability: a factory class counts as HA)", async () => {
    const { runs } = await start({ 'high-availability': 'org.example.MyHaServicesFactory' });
    expect((await runs.idsFor({ applicationId: APP })).jobId).toBe(APP);
  });

  it('without HA Flink fixes no job id, and none is sent: the application id is the registration key until its jobs have theirs', async () => {
    const { runs } = await start({ 'high-availability.type': 'NONE' });
    expect(await runs.idsFor({ applicationId: APP })).toEqual({ jobId: APP, applicationId: APP, rule: 'application' });
  });

  it('a provisional registration under the application id ends once the application lists its first job, which gets the registration', async () => {
    const registrar = new RecordingRegistrar();
    registrar.known.add(APP);
    const unregistered: string[] = [];
    registrar.unregister = async (jobId: string) => {
      unregistered.push(jobId);
      registrar.known.delete(jobId);
    };
    const { jm, runs } = await start({}, registrar);
    jm.app.jobs = [];
    runs.track({
      applicationId: APP,
      configuration: { k: 'v' },
      principal: 'token:ci',
      release: async () => undefined,
      log,
      provisional: true,
    });
    await runs.adopt(FIRST);
    expect(unregistered).toEqual([]);
    jm.app.jobs = [FIRST];
    expect(await runs.adopt(FIRST)).toBe(true);
    expect(registrar.registered).toEqual([{ jobId: FIRST, configuration: { k: 'v' }, principal: 'token:ci' }]);
    expect(unregistered).toEqual([APP]);
  });

  it("a later job of the application gets the application's registration; the jar is released only once the application is terminal", async () => {
    const registrar = new RecordingRegistrar();
    registrar.known.add(FIRST);
    const { jm, runs } = await start({}, registrar);
    let released = 0;
    runs.track({
      applicationId: APP,
      configuration: { 'security.delegation.job.x.scope': 'team-a' },
      principal: 'token:ci',
      release: async () => void released++,
      log,
    });
    // The first job alone, the application running: nothing to register, the jar kept.
    expect(await runs.adopt(FIRST)).toBe(true);
    expect(registrar.registered).toEqual([]);
    // main() submits a second job: the watcher finds it, and it is the application's.
    jm.app.jobs.push(LATER);
    expect(await runs.adopt(LATER)).toBe(true);
    expect(registrar.registered).toEqual([
      { jobId: LATER, configuration: { 'security.delegation.job.x.scope': 'team-a' }, principal: 'token:ci' },
    ]);
    expect(released).toBe(0);
    // A job of no followed application is not adopted.
    expect(await runs.adopt('33333333333333333333333333333333')).toBe(false);
    jm.app.status = 'FINISHED';
    await runs.adopt(LATER);
    expect(released).toBe(1);
    expect(runs.tracked()).toEqual([]);
  });

  it('an application the JobManager no longer knows (three reads) is no longer followed and its jar is released', async () => {
    const { jm, runs } = await start({});
    let released = 0;
    jm.app.known = false;
    runs.track({ applicationId: APP, configuration: {}, principal: 'anonymous', release: async () => void released++, log });
    for (let i = 0; i < 2; i++) await runs.adopt(LATER);
    expect(released).toBe(0);
    await runs.adopt(LATER);
    expect(released).toBe(1);
  });
});
