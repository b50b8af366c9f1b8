import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BridgeReceiverSet } from '../../../src/tokens/receivers/bridge-receivers';
import { FileTokenReceiver } from '../../../src/tokens/receivers/file-receiver';
import { keepJobs, parsePerJob } from '../../../src/tokens/receivers/per-job-payload';
import type { TokenJobListener } from '../../../src/plugin-kit/token-spi';
import { createTokenManager } from '../../../src/tokens/token-manager';
import { flush, ManualClock } from '../../helpers/manual-clock';
import { bytes, captureLogger, FakeProvider, tokenConfig } from '../../helpers/token-fakes';
import { JobRefusedError } from '../../../src/plugin-kit/registration-error';

const JOB_A = 'a'.repeat(32);
const JOB_B = 'b'.repeat(32);
const decode = (b64: string) => JSON.parse(Buffer.from(b64, 'base64').toString('utf8')) as Record<string, unknown>;

describe('BridgeReceiverSet: what the token bridge serves', () => {
  it("creates one receiver per provider name and serves each provider's latest payload, base64", async () => {
    const set = new BridgeReceiverSet({ log: captureLogger().log });
    const [s3, oauth2] = set.receiversFor(['s3', 'oauth2']);
    expect([s3?.serviceName, oauth2?.serviceName]).toEqual(['s3', 'oauth2']);
    expect(set.container()).toEqual({ version: 1, tokens: {} });
    await set.jobRegistering(JOB_A);
    await s3!.onNewTokensObtained(bytes(JSON.stringify({ version: 1, region: 'r', jobs: { [JOB_A]: { k: 1 } } })));
    await oauth2!.onNewTokensObtained(bytes('opaque, not per job'));
    await s3!.onNewTokensObtained(bytes(JSON.stringify({ version: 1, region: 'r', jobs: { [JOB_A]: { k: 2 } } })));
    const c = set.container();
    expect(Object.keys(c.tokens).sort()).toEqual(['oauth2', 's3']);
    expect(decode(c.tokens.s3!)).toEqual({ version: 1, region: 'r', jobs: { [JOB_A]: { k: 2 } } });
    expect(Buffer.from(c.tokens.oauth2!, 'base64').toString('utf8')).toBe('opaque, not per job');
  });

  it('leaves out the entries of jobs that are not registered (unregistered, or a stale cycle)', async () => {
    const set = new BridgeReceiverSet({ log: captureLogger().log });
    const [oauth2] = set.receiversFor(['oauth2']);
    await set.jobRegistering(JOB_A);
    await set.jobRegistering(JOB_B);
    await oauth2!.onNewTokensObtained(bytes(JSON.stringify({ version: 1, jobs: { [JOB_A]: { t: 'a' }, [JOB_B]: { t: 'b' } } })));
    expect(Object.keys(decode(set.container().tokens.oauth2!).jobs as object)).toEqual([JOB_A, JOB_B]);
    // The provider is not asked again (no jobs left would make it skip the cycle): the bridge still drops B at once.
    await set.jobUnregistered(JOB_B, 'unregistered');
    expect(decode(set.container().tokens.oauth2!)).toEqual({ version: 1, jobs: { [JOB_A]: { t: 'a' } } });
    await set.jobUnregistered(JOB_A, 'session-end');
    expect(decode(set.container().tokens.oauth2!)).toEqual({ version: 1, jobs: {} });
  });

  it('feeds the file receiver with the same payloads and job events', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gw-bridge-file-'));
    try {
      const file = new FileTokenReceiver({ dir, log: captureLogger().log });
      const set = new BridgeReceiverSet({ log: captureLogger().log, file });
      const [oauth2] = set.receiversFor(['oauth2']);
      await set.jobRegistering(JOB_A);
      await oauth2!.onNewTokensObtained(bytes(JSON.stringify({ version: 1, jobs: { [JOB_A]: { t: 'a' } } })));
      expect(readdirSync(dir)).toEqual([`${JOB_A}.json`]);
      await set.jobUnregistered(JOB_A, 'unregistered');
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('per-job payload helpers: parse the convention, keep the same bytes when nothing is dropped', () => {
    const b = bytes(JSON.stringify({ version: 1, accountName: 'acct', jobs: { [JOB_A]: {} } }));
    expect(parsePerJob(b)).toEqual({ jobs: { [JOB_A]: {} }, context: { accountName: 'acct' } });
    expect(parsePerJob(bytes('[1]'))).toBeUndefined();
    expect(parsePerJob(bytes('{"jobs":[]}'))).toBeUndefined();
    expect(keepJobs(b, () => true)).toBe(b);
    expect(keepJobs(bytes('x'), () => false)).toEqual(bytes('x'));
  });
});

describe('the manager tells a job listener about its registry', () => {
  class RecordingJobListener implements TokenJobListener {
    readonly events: string[] = [];
    constructor(private readonly seen: () => string) {}
    jobRegistering(jobId: string): void {
      this.events.push(`registering ${jobId} (${this.seen()})`);
    }
    jobUnregistered(jobId: string, cause: string): void {
      this.events.push(`unregistered ${jobId} ${cause}`);
    }
  }

  const setup = async () => {
    const clock = new ManualClock();
    const provider = new FakeProvider('p');
    const listener = new RecordingJobListener(() => `provider saw ${provider.registered.length}`);
    const { log } = captureLogger();
    const manager = await createTokenManager({
      config: tokenConfig(),
      providers: [provider],
      receivers: [{ serviceName: 'p', init: () => undefined, onNewTokensObtained: () => undefined }],
      log,
      clock,
      jobListener: listener,
    });
    await manager.start();
    await flush();
    return { manager, provider, listener };
  };

  it('announces a job before any provider sees it, and its unregistration after every provider dropped it', async () => {
    const { manager, provider, listener } = await setup();
    await manager.registerJob(JOB_A, {});
    expect(listener.events).toEqual([`registering ${JOB_A} (provider saw 0)`]);
    await manager.unregisterJob(JOB_A);
    expect(provider.unregistered).toEqual([JOB_A]);
    expect(listener.events.at(-1)).toBe(`unregistered ${JOB_A} unregistered`);
    await manager.close();
  });

  it('a refused first registration is rolled back as "unregistered"; the session end says "session-end"', async () => {
    const { manager, provider, listener } = await setup();
    provider.register = (jobId) => {
      if (jobId === JOB_B) throw new JobRefusedError('no');
    };
    await expect(manager.registerJob(JOB_B, {})).rejects.toMatchObject({ code: 'GW_TOKENS_REJECTED' });
    expect(listener.events).toEqual([`registering ${JOB_B} (provider saw 0)`, `unregistered ${JOB_B} unregistered`]);
    await manager.registerJob(JOB_A, {});
    await manager.close();
    expect(listener.events.at(-1)).toBe(`unregistered ${JOB_A} session-end`);
  });

  it('a failing listener is logged and changes nothing', async () => {
    const clock = new ManualClock();
    const provider = new FakeProvider('p');
    const logs = captureLogger();
    const manager = await createTokenManager({
      config: tokenConfig(),
      providers: [provider],
      receivers: [{ serviceName: 'p', init: () => undefined, onNewTokensObtained: () => undefined }],
      log: logs.log,
      clock,
      jobListener: {
        jobRegistering: () => Promise.reject(new Error('disk full')),
        jobUnregistered: () => {
          throw new Error('disk full');
        },
      },
    });
    await manager.start();
    await manager.registerJob(JOB_A, {});
    expect(manager.status().registeredJobs).toEqual([JOB_A]);
    await manager.unregisterJob(JOB_A);
    expect(manager.status().registeredJobs).toEqual([]);
    expect(logs.messages('error')).toEqual(['token job listener failed in jobRegistering', 'token job listener failed in jobUnregistered']);
    await manager.close();
  });
});
