import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { hasApplications } from '../../src/cluster/flink-version';
import type { StandaloneCluster } from '../../src/cluster/standalone-cluster';
import { errorCode, json, newJobId, uploadBytes, uploadFile, waitForJobState, WORDCOUNT_CLASS } from '../helpers/flink';
import { builtinTokenProviders as builtInTokenProviders } from '../../fs-plugins';
import { flinkCli, startDistCluster, TEST_JOB_JAR, TOKEN_BRIDGE_JAR, wordCountJarFor } from '../helpers/flink-dist';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { clientLineOf, runOperatorSequence } from '../helpers/java-client';
import { operatorPlaceholderJar } from '../helpers/operator-placeholder';
import { startHttpOrigin, type HttpOrigin } from '../servers/http-origin';
import { putObject, startS3Server, type S3Server } from '../servers/s3-server';
import { makeSelfSignedCert } from '../servers/tls';

/**
 * The core e2e set on one version of Flink's own distribution (JobManager and TaskManagers as
 * separate processes, started by Flink's scripts), through the gateway. `full` runs everything
 * (every version does today: about 95 s per version on 2 cores); `smoke` (jar lifecycle, URI run,
 * the operator's sequence with that version's Java client, that version's CLI, run-application)
 * is the fallback should the matrix stop fitting the CI budget.
 */
export type SuiteLevel = 'full' | 'smoke';

const S3_KEY = { accessKeyId: 'AKIDDISTMATRIX', secretAccessKey: `s3-secret-${randomBytes(8).toString('hex')}` };
const CHROMIUM = '/usr/bin/chromium';
/** Short-lived tokens, so that the task sees renewals within seconds (renewal at 0.75 of 3 s). */
const TOKEN_TTL_S = 3;

/** A client-credentials token endpoint: every request gets a new token, valid TOKEN_TTL_S seconds. */
function startTokenEndpoint(): Promise<{ server: Server; url: string; issued: () => number }> {
  let n = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ access_token: `dist-token-${++n}`, token_type: 'Bearer', expires_in: TOKEN_TTL_S }));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`, issued: () => n }),
    ),
  );
}

export function distributionSuite(version: string, level: SuiteLevel): void {
  const full = level === 'full';
  const itFull = full ? it : it.skip;
  const wordcount = wordCountJarFor(version);
  const wordcountBytes = readFileSync(wordcount);

  describe(`Flink ${version} distribution (separate JobManager/TaskManager processes) through the gateway [${level}]`, () => {
    let cluster: StandaloneCluster;
    let gw: TestGateway;
    let origin: HttpOrigin;
    let s3: S3Server;
    let dir: string;
    let tokenEndpoint: Awaited<ReturnType<typeof startTokenEndpoint>> | undefined;
    const jars: string[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), `gw-dist-${version}-`));
      const tls = makeSelfSignedCert();
      writeFileSync(join(dir, 'ca.pem'), tls.cert);
      // Full level: the token bridge installed as a user installs it (lib/ of the JobManager and
      // TaskManagers), pulling from this suite's gateway through a URL file written once it listens.
      const bridgeDir = join(dir, 'bridge');
      mkdirSync(bridgeDir);
      const bridge = full
        ? {
            extraLibJars: [TOKEN_BRIDGE_JAR],
            flinkConfig: {
              'security.delegation.token.provider.gateway.url-file': join(bridgeDir, 'url'),
              'security.delegation.token.provider.gateway.secret-file': join(bridgeDir, 'bridge-secret'),
              'security.delegation.token.provider.gateway.poll-interval': '500 ms',
              'security.delegation.token.provider.gateway.idle-interval': '2 s',
              'security.delegation.tokens.renewal.retry.backoff': '1 s',
              'classloader.parent-first-patterns.additional': 'dev.flinkjargateway.tokens.',
            },
          }
        : {};
      tokenEndpoint = full ? await startTokenEndpoint() : undefined;
      // Each assigned as soon as it runs, so that afterAll stops it even when another one fails.
      await Promise.all([
        startDistCluster(version, { taskManagers: full ? 2 : 1, ...bridge }).then((c) => (cluster = c)),
        startHttpOrigin({ tls, files: { '/jobs/wordcount.jar': wordcountBytes } }).then((o) => (origin = o)),
        startS3Server({ keys: { [S3_KEY.accessKeyId]: S3_KEY.secretAccessKey }, buckets: ['team-jars'] }).then((s) => (s3 = s)),
      ]);
      await putObject(s3.url, S3_KEY, 'team-jars', 'jobs/wordcount.jar', wordcountBytes);
      gw = await startGateway(
        cluster.restUrl,
        {
          'web.submit.jar-uri.enable': 'true',
          'gateway.artifacts.allowed-schemes': 'https;s3',
          'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port};127.0.0.1:${s3.port}`,
          'gateway.artifacts.ca-bundle': join(dir, 'ca.pem'),
          's3.endpoint': s3.url,
          's3.path.style.access': 'true',
          's3.access-key': S3_KEY.accessKeyId,
          's3.secret-key': S3_KEY.secretAccessKey,
          ...(tokenEndpoint
            ? {
                'gateway.tokens.store-dir': join(dir, 'store'),
                'gateway.tokens.watcher.interval': '200 ms',
                'gateway.tokens.watcher.missing-grace': '0 ms',
                'security.delegation.tokens.reobtain.cooldown': '0 ms',
                'gateway.tokens.bridge-secret-file': join(bridgeDir, 'bridge-secret'),
                'security.delegation.token.provider.oauth2.token-endpoint': tokenEndpoint.url,
                'security.delegation.token.provider.oauth2.client-id': 'dist-client',
                'security.delegation.token.provider.oauth2.client-secret': 'dist-client-secret',
              }
            : {}),
        },
        [httpPlugin, s3Plugin],
        full ? { providers: builtInTokenProviders.map((p) => p.create()) } : {},
      );
      if (full) {
        writeFileSync(join(bridgeDir, 'url.tmp'), `${gw.url}\n`);
        renameSync(join(bridgeDir, 'url.tmp'), join(bridgeDir, 'url'));
      }
    }, 600_000);

    afterAll(async () => {
      for (const id of jars) await json('DELETE', `${gw.url}/v1/jars/${id}`).catch(() => undefined);
      await gw?.close();
      await Promise.all([
        cluster?.stop(),
        origin?.stop(),
        s3?.stop(),
        new Promise<void>((r) => (tokenEndpoint ? tokenEndpoint.server.close(() => r()) : r())),
      ]);
      if (dir) rmSync(dir, { recursive: true, force: true });
    }, 60_000);

    const upload = async (path: string, name: string) => {
      const up = await uploadFile(gw.url, path, name);
      expect(up).toMatchObject({ status: 200, body: { status: 'success' } });
      const id = String(up.body.filename).split('/').pop()!;
      jars.push(id);
      return id;
    };
    const placeholder = async () => {
      const up = await uploadBytes(gw.url, [{ name: 'empty.jar', bytes: await operatorPlaceholderJar(), field: 'file_0' }], {
        request: '{}',
      });
      expect(up.status).toBe(200);
      const id = String(up.body.filename).split('/').pop()!;
      jars.push(id);
      return id;
    };
    /** A WordCount that keeps running: it watches a directory for new files. */
    const streamingArgs = () => {
      const input = join(dir, `input-${randomBytes(3).toString('hex')}`);
      mkdirSync(input);
      writeFileSync(join(input, 'a.txt'), 'to be or not to be\n');
      return ['--input', input, '--discovery-interval', '1s'];
    };

    it('answers GET /config with its own version through the gateway', async () => {
      const config = await json('GET', `${gw.url}/config`);
      expect(config.body['flink-version']).toBe(version);
      expect((await json('GET', `${gw.url}/v1/overview`)).body.taskmanagers).toBe(full ? 2 : 1);
    });

    it('jar lifecycle: upload, list, plan, run to FINISHED, delete (twice: 400)', async () => {
      const jarId = await upload(wordcount, 'WordCount.jar');
      const listed = ((await json('GET', `${gw.url}/jars`)).body.files as { id: string; entry: { name: string }[] }[]).find(
        (f) => f.id === jarId,
      );
      expect(listed?.entry.map((e) => e.name)).toContain(WORDCOUNT_CLASS);
      const plan = await json('POST', `${gw.url}/v1/jars/${jarId}/plan`, {});
      expect(plan.status).toBe(200);
      expect((plan.body.plan as { nodes: unknown[] }).nodes.length).toBeGreaterThan(0);
      const jobId = newJobId();
      const run = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, { jobId, programArgsList: [] });
      expect(run).toMatchObject({ status: 200, body: { jobid: jobId } });
      // Flink 2.3's /run also names the session application that runs the job; the gateway keeps it.
      expect(Object.keys(run.body).sort()).toEqual(hasApplications(version) ? ['applicationId', 'jobid'] : ['jobid']);
      expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
      expect(await json('DELETE', `${gw.url}/jars/${jarId}`)).toMatchObject({ status: 200 });
      const again = await json('DELETE', `${gw.url}/jars/${jarId}`);
      expect({ status: again.status, code: errorCode(again) }).toEqual({ status: 400, code: 'GW_JAR_NOT_FOUND' });
    });

    it("runs by URI over HTTPS and from S3 in place of the operator's placeholder", async () => {
      const id = await placeholder();
      for (const uri of [`${origin.url}/jobs/wordcount.jar`, 's3://team-jars/jobs/wordcount.jar']) {
        const jobId = newJobId();
        const r = await json('POST', `${gw.url}/v1/jars/${id}/run`, {
          jobId,
          entryClass: WORDCOUNT_CLASS,
          programArgsList: [],
          flinkConfiguration: { 'user.artifacts.job-jar': uri },
        });
        expect({ uri, status: r.status, jobid: r.body.jobid }).toEqual({ uri, status: 200, jobid: jobId });
        expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
      }
    });

    it(`the operator's placeholder sequence with Flink ${version}'s own Java RestClient`, async () => {
      const dirJar = join(dir, 'empty.jar');
      writeFileSync(dirJar, await operatorPlaceholderJar());
      const jobId = newJobId();
      const r = await runOperatorSequence(
        clientLineOf(version),
        [
          '--url',
          gw.url,
          '--jar',
          dirJar,
          '--entry-class',
          WORDCOUNT_CLASS,
          '--job-id',
          jobId,
          '--conf',
          `user.artifacts.job-jar=s3://team-jars/jobs/wordcount.jar`,
        ],
        {},
        version,
      );
      expect(r.flinkClientVersion).toBe(version);
      expect(r.upload.ok).toBe(true);
      expect(r.run1).toEqual({ ok: true, jobid: jobId });
      // The retried POST gets the first result (raw Flink: 400 DuplicateJobSubmissionException).
      expect(r.run2).toEqual({ ok: true, jobid: jobId });
      expect(r.overview).toMatchObject({ ok: true, listed: true });
      expect(r.delete1.ok).toBe(true);
      expect(r.delete2).toMatchObject({ ok: false, httpStatus: 400 });
      expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
    }, 300_000);

    it(`flink run / list / cancel with Flink ${version}'s own CLI through the gateway`, async () => {
      const run = await flinkCli(cluster, gw.url, ['run', '-d', wordcount, ...streamingArgs()]);
      const jobId = /JobID ([0-9a-f]{32})/.exec(run.out)?.[1];
      expect({ status: run.status, jobId: jobId ? 'found' : run.out.slice(-2000) }).toEqual({ status: 0, jobId: 'found' });
      expect(await waitForJobState(gw.url, jobId!, ['RUNNING', 'FAILED', 'FINISHED'])).toBe('RUNNING');
      // The job graph went through the gateway's pass-through (POST /v1/jobs), audited as such.
      expect(gw.audit().some((a) => a.route === 'job-graph')).toBe(true);
      const list = await flinkCli(cluster, gw.url, ['list', '-r']);
      expect(list.status).toBe(0);
      expect(list.out).toContain(jobId);
      const cancel = await flinkCli(cluster, gw.url, ['cancel', jobId!]);
      expect({ status: cancel.status, out: cancel.status === 0 ? '' : cancel.out.slice(-2000) }).toEqual({ status: 0, out: '' });
      expect(await waitForJobState(gw.url, jobId!, ['CANCELED', 'FAILED'])).toBe('CANCELED');
    }, 300_000);

    itFull(
      'cancel with savepoint, then a run restored from it (savepointPath, claimMode)',
      async () => {
        const jarId = await upload(wordcount, 'WordCount.jar');
        const jobId = newJobId();
        expect((await json('POST', `${gw.url}/v1/jars/${jarId}/run`, { jobId, programArgsList: streamingArgs() })).status).toBe(200);
        await waitForJobState(gw.url, jobId, ['RUNNING']);
        await waitForAllTasksRunning(gw.url, jobId);
        const trigger = await json('POST', `${gw.url}/v1/jobs/${jobId}/savepoints`, {
          'cancel-job': true,
          'target-directory': `file://${join(dir, 'savepoints')}`,
          formatType: 'CANONICAL',
        });
        expect(trigger.status).toBe(202);
        const location = await waitForSavepoint(gw.url, jobId, String(trigger.body['request-id']));
        expect(location).toMatch(/^file:.*savepoint-/);
        expect(await waitForJobState(gw.url, jobId, ['CANCELED', 'FAILED'])).toBe('CANCELED');
        expect(gw.audit().some((a) => a.audit === 'control' && a.jobId === jobId)).toBe(true);

        const resumed = newJobId();
        const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
          jobId: resumed,
          programArgsList: streamingArgs(),
          savepointPath: location,
          claimMode: 'NO_CLAIM',
        });
        expect(r).toMatchObject({ status: 200, body: { jobid: resumed } });
        await waitForJobState(gw.url, resumed, ['RUNNING']);
        const detail = await json('GET', `${gw.url}/v1/jobs/${resumed}/checkpoints`);
        expect(JSON.stringify(detail.body.latest ?? {})).toContain('restored');
        expect((await json('PATCH', `${gw.url}/v1/jobs/${resumed}?mode=cancel`)).status).toBe(202);
        await waitForJobState(gw.url, resumed, ['CANCELED']);
      },
      300_000,
    );

    itFull(
      "the Web UI overview renders this version's cluster through the gateway",
      async () => {
        const browser = await chromium.launch({
          executablePath: CHROMIUM,
          args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
          timeout: 30_000,
        });
        try {
          const page = await browser.newPage();
          const problems: string[] = [];
          page.on('response', (res) => {
            if (res.url().startsWith(gw.url) && res.status() >= 400) problems.push(`HTTP ${res.status()} ${res.url()}`);
          });
          await page.goto(`${gw.url}/#/overview`);
          // The header's version comes from GET /config; the cards from GET /overview.
          await page.getByText(version, { exact: false }).first().waitFor({ timeout: 30_000 });
          await page.getByText('Available Task Slots').first().waitFor({ timeout: 30_000 });
          // 2.3's dashboard lists applications where earlier ones list jobs.
          await page
            .getByText(/Running (Job|Application) List/)
            .first()
            .waitFor({ timeout: 30_000 });
          expect(problems).toEqual([]);
        } finally {
          await browser.close();
        }
      },
      120_000,
    );

    itFull(
      "token bridge across processes: a task in a TaskManager JVM reads its job's token, renewed twice",
      async () => {
        const jarId = await upload(TEST_JOB_JAR, 'GatewayTestJob.jar');
        const jobId = newJobId();
        const before = tokenEndpoint!.issued();
        // Three different versions of the job's entry, seen inside the task: the first token and two renewals.
        const r = await json('POST', `${gw.url}/v1/jars/${jarId}/run`, {
          jobId,
          entryClass: 'dev.flinkjargateway.testjobs.TokenProbe',
          programArgsList: ['--provider', 'oauth2', '--expect', 'dist-token-', '--distinct', '3', '--timeout-ms', '60000'],
          flinkConfiguration: { 'parallelism.default': '1' },
        });
        expect(r.status).toBe(200);
        const state = await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'], 120_000);
        if (state !== 'FINISHED')
          throw new Error(
            `TokenProbe ${state}: ${JSON.stringify((await json('GET', `${gw.url}/v1/jobs/${jobId}/exceptions`)).body).slice(0, 2000)}`,
          );
        // The task ran in a TaskManager process, not the JobManager's: its host is a TaskManager.
        const tms = ((await json('GET', `${gw.url}/v1/taskmanagers`)).body.taskmanagers as { id: string }[]).map((t) => t.id);
        const vertex = ((await json('GET', `${gw.url}/v1/jobs/${jobId}`)).body.vertices as { id: string; name: string }[]).find((v) =>
          /token-probe/.test(v.name),
        )!;
        const subtasks = (await json('GET', `${gw.url}/v1/jobs/${jobId}/vertices/${vertex.id}/taskmanagers`)).body.taskmanagers as {
          'taskmanager-id': string;
        }[];
        expect(tms).toContain(subtasks[0]!['taskmanager-id']);
        expect(tokenEndpoint!.issued() - before).toBeGreaterThanOrEqual(3);
        expect(JSON.stringify(gw.logs)).not.toContain('dist-token-');
      },
      180_000,
    );

    if (hasApplications(version)) {
      it('POST /jars/:jarid/run-application (Flink 2.3): 202 {applicationid}, with the same URI, audit and retry semantics as /run', async () => {
        const jarId = await upload(wordcount, 'WordCount.jar');
        const jobId = newJobId();
        const body = { jobId, programArgsList: [] };
        const first = await json('POST', `${gw.url}/v1/jars/${jarId}/run-application`, body);
        expect(first.status).toBe(202);
        expect(Object.keys(first.body)).toEqual(['applicationid']);
        const applicationId = String(first.body.applicationid);
        expect(applicationId).toMatch(/^[0-9a-f]{32}$/);
        // A retry of the same request gets the first answer (no second application).
        expect(await json('POST', `${gw.url}/v1/jars/${jarId}/run-application`, body)).toEqual({
          status: 202,
          body: { applicationid: applicationId },
          headers: expect.anything(),
        });
        expect(await waitForJobState(gw.url, jobId, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
        const apps = await json('GET', `${gw.url}/v1/applications/overview`);
        expect(apps.status).toBe(200);
        expect(JSON.stringify(apps.body)).toContain(applicationId);
        expect(
          gw
            .audit()
            .filter((a) => a.route === 'run-application' && a.jobId === jobId)
            .map((a) => [a.outcome, a.status]),
        ).toEqual([
          ['accepted', 202],
          ['deduplicated', 202],
        ]);

        // By URI in place of the operator's placeholder, as /run.
        const id = await placeholder();
        const byUri = newJobId();
        const r = await json('POST', `${gw.url}/v1/jars/${id}/run-application`, {
          jobId: byUri,
          entryClass: WORDCOUNT_CLASS,
          flinkConfiguration: { 'user.artifacts.job-jar': `${origin.url}/jobs/wordcount.jar` },
        });
        expect(r.status).toBe(202);
        expect(await waitForJobState(gw.url, byUri, ['FINISHED', 'FAILED', 'CANCELED'])).toBe('FINISHED');
        expect(gw.audit().find((a) => a.route === 'run-application' && a.jobId === byUri)).toMatchObject({
          source: 'uri',
          outcome: 'accepted',
        });
      }, 300_000);
    } else {
      it('POST /jars/:jarid/run-application answers 404 Not found, as this version does', async () => {
        const jarId = await upload(wordcount, 'WordCount.jar');
        const direct = await json('POST', `${cluster.restUrl}/v1/jars/${jarId}/run-application`, {});
        const via = await json('POST', `${gw.url}/v1/jars/${jarId}/run-application`, {});
        expect(direct.status).toBe(404);
        expect({ status: via.status, code: errorCode(via) }).toEqual({ status: 404, code: 'GW_ROUTE_NOT_FOUND' });
      });
    }
  });
}

/** A savepoint needs every task RUNNING (not just the job). */
async function waitForAllTasksRunning(url: string, jobId: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const r = await json('GET', `${url}/v1/jobs/${jobId}`);
    const vertices = (r.body.vertices as { status: string }[] | undefined) ?? [];
    if (vertices.length > 0 && vertices.every((v) => v.status === 'RUNNING')) return;
    await new Promise((res) => setTimeout(res, 250));
  }
  throw new Error(`the tasks of ${jobId} did not all reach RUNNING`);
}

async function waitForSavepoint(url: string, jobId: string, triggerId: string): Promise<string> {
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const r = await json('GET', `${url}/v1/jobs/${jobId}/savepoints/${triggerId}`);
    const status = (r.body.status as { id?: string } | undefined)?.id;
    if (status === 'COMPLETED') {
      const op = r.body.operation as { location?: string; 'failure-cause'?: unknown };
      if (!op.location) throw new Error(`savepoint failed: ${JSON.stringify(op['failure-cause']).slice(0, 1000)}`);
      return op.location;
    }
    await new Promise((res) => setTimeout(res, 250));
  }
  throw new Error('the savepoint did not complete');
}
