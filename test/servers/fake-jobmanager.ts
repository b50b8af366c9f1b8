import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Request, Response } from 'express';
import multer, { type StorageEngine } from 'multer';

/** One jar the fake JobManager holds, by id, with the digest of the bytes it received. */
export interface HeldJar {
  id: string;
  name: string;
  sha256: string;
  size: number;
}

/** One run the fake JobManager accepted: which jar, with which bytes. */
export interface AcceptedRun {
  jarId: string;
  jobId: string;
  sha256: string;
  flinkConfiguration: Record<string, unknown>;
}

export interface FakeJobManager {
  url: string;
  port: number;
  jars: Map<string, HeldJar>;
  runs: AcceptedRun[];
  /** Every request line seen (`POST /v1/jars/upload`). */
  requests: string[];
  /** When set, `/run` answers this status with a Flink error body instead of accepting the job. */
  rejectRuns?: { status: number; message: string };
  /** When set, `/jars/upload` drains the body and answers this status with a Flink error body. */
  rejectUploads?: { status: number; message: string };
  /** When set, `/config` says `features.web-submit: false` (as Flink with `web.submit.enable: false`). */
  webSubmitDisabled?: boolean;
  /**
   * Ids Flink would refuse although `GET /jobs/:id/status` does not know them (its job-result
   * store keeps a finished job's id for the life of a JobManager without HA).
   */
  resultStore: Set<string>;
  /** When set, `GET /jobs/:id/status` answers this status (a JobManager electing a leader, say). */
  jobStatusFails?: number;
  /** When set, every JSON answer carries `Access-Control-Allow-Origin: <this>` (Flink's `web.access-control-allow-origin`). */
  allowOrigin?: string;
  /** Forgets every job, as a JobManager restarted without HA does (jars are kept: the test decides). */
  forgetJobs(): void;
  stop(): Promise<void>;
}

/** Keeps only the size and SHA-256 of an uploaded file (the fake holds no bytes). */
const hashingStorage: StorageEngine = {
  _handleFile(_req, file, cb) {
    const hash = createHash('sha256');
    let size = 0;
    file.stream.on('data', (d: Buffer) => {
      hash.update(d);
      size += d.length;
    });
    file.stream.on('error', (err) => cb(err));
    file.stream.on('end', () => cb(null, { size, sha256: hash.digest('hex') } as Partial<Express.Multer.File>));
  },
  _removeFile: (_req, _file, cb) => cb(null),
};

/**
 * A node:http stand-in for a Flink JobManager, for tests that need the gateway's fetch and hand-off
 * but not a real job: `POST /v1/jars/upload` (multipart, kept as a SHA-256 digest), `GET /v1/jars`,
 * `DELETE /v1/jars/:id`, `POST /v1/jars/:id/run` (records the jar's digest: "which bytes would
 * have run"), `GET /v1/config`, `GET /v1/jobs/:id` and `/status` (200 for the jobs it accepted, else 404; a run under
 * an id it knows is refused as Flink refuses it). Not a Flink emulator: a fake,
 * used where the real cluster adds nothing but time.
 */
export async function startFakeJobManager(): Promise<FakeJobManager> {
  const jars = new Map<string, HeldJar>();
  const runs: AcceptedRun[] = [];
  const requests: string[] = [];
  const send = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res
      .writeHead(status, {
        'content-type': 'application/json; charset=UTF-8',
        'content-length': String(Buffer.byteLength(text)),
        ...(jm.allowOrigin !== undefined ? { 'access-control-allow-origin': jm.allowOrigin } : {}),
      })
      .end(text);
  };
  const readJson = async (req: IncomingMessage): Promise<Record<string, unknown>> => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };
  /** Jobs it knows (accepted runs since the last `forgetJobs`), as Flink's dispatcher does. */
  const jobs = new Set<string>();
  const jm: FakeJobManager = {
    url: '',
    port: 0,
    jars,
    runs,
    requests,
    resultStore: new Set<string>(),
    forgetJobs: () => jobs.clear(),
    stop: async () => undefined,
  };
  const server: Server = createServer({ requestTimeout: 0 }, (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!.replace(/^\/v1(?=\/)/, '');
    requests.push(`${req.method} ${req.url}`);
    if (req.method === 'POST' && path === '/jars/upload' && jm.rejectUploads) {
      const reject = jm.rejectUploads;
      req.resume();
      req.once('end', () => send(res, reject.status, { errors: [reject.message] }));
      return;
    }
    if (req.method === 'POST' && path === '/jars/upload') {
      // Like Flink's decoder, a file counts only once its multipart body is complete.
      const keep = multer({ storage: hashingStorage }).any();
      keep(req as unknown as Request, res as unknown as Response, (err?: unknown) => {
        if (err) return send(res, 400, { errors: ['bad multipart'] });
        const file = ((req as unknown as { files?: (Express.Multer.File & { sha256: string })[] }).files ?? [])[0];
        if (!file) return send(res, 400, { errors: ['Exactly 1 file must be sent, received 0.'] });
        const name = file.originalname || 'job.jar';
        const held: HeldJar = { id: `${randomUUID()}_${name}`, name, sha256: file.sha256, size: file.size };
        jars.set(held.id, held);
        send(res, 200, { filename: `/tmp/flink-web-upload/${held.id}`, status: 'success' });
      });
      return;
    }
    if (req.method === 'GET' && path === '/jars') {
      return send(res, 200, {
        address: jm.url,
        files: [...jars.values()].map((j) => ({ id: j.id, name: j.name, uploaded: Date.now(), entry: [] })),
      });
    }
    const del = /^\/jars\/([^/]+)$/.exec(path);
    if (req.method === 'DELETE' && del) {
      const id = decodeURIComponent(del[1]!);
      if (!jars.delete(id)) return send(res, 400, { errors: [`File ${id} does not exist in /tmp/flink-web-upload.`] });
      return send(res, 200, {});
    }
    const run = /^\/jars\/([^/]+)\/run$/.exec(path);
    if (req.method === 'POST' && run) {
      void readJson(req).then((body) => {
        const id = decodeURIComponent(run[1]!);
        const jar = jars.get(id);
        if (!jar) return send(res, 500, { errors: [`Jar file /tmp/flink-web-upload/${id} does not exist`] });
        if (jm.rejectRuns) return send(res, jm.rejectRuns.status, { errors: [jm.rejectRuns.message] });
        const jobId = typeof body.jobId === 'string' ? body.jobId : randomBytes(16).toString('hex');
        // Flink's dispatcher refuses an id it has (running, or in its job-result store), as a 400 whose stack trace names it.
        if (jobs.has(jobId) || jm.resultStore.has(jobId)) {
          return send(res, 400, {
            errors: [
              `org.apache.flink.runtime.rest.handler.RestHandlerException: Could not execute application.\n\tat org.apache.flink.runtime.webmonitor.handlers.JarRunHandler.lambda$handleRequest$1(JarRunHandler.java:123)\nCaused by: org.apache.flink.runtime.client.DuplicateJobSubmissionException: Job has already been submitted.\n\tat org.apache.flink.runtime.dispatcher.Dispatcher.submitJob(Dispatcher.java:456)\n`,
            ],
          });
        }
        jobs.add(jobId);
        runs.push({ jarId: id, jobId, sha256: jar.sha256, flinkConfiguration: (body.flinkConfiguration as Record<string, unknown>) ?? {} });
        send(res, 200, { jobid: jobId });
      });
      return;
    }
    if (req.method === 'GET' && path === '/config')
      return send(res, 200, {
        'refresh-interval': 3000,
        'timezone-name': 'UTC',
        'timezone-offset': 0,
        'flink-version': '2.1.0',
        'flink-revision': 'fake',
        features: { 'web-submit': !jm.webSubmitDisabled, 'web-cancel': true, 'web-rescale': false, 'web-history': false },
      });
    const status = /^\/jobs\/([0-9a-f]{32})(?:\/status)?$/.exec(path);
    if (req.method === 'GET' && status) {
      if (jm.jobStatusFails !== undefined)
        return send(res, jm.jobStatusFails, {
          errors: ['org.apache.flink.runtime.rest.handler.RestHandlerException: No leader available.'],
        });
      if (jobs.has(status[1]!))
        return send(res, 200, path.endsWith('/status') ? { status: 'RUNNING' } : { jid: status[1], state: 'RUNNING' });
      return send(res, 404, { errors: ['org.apache.flink.runtime.rest.NotFoundException: Job ' + status[1] + ' not found'] });
    }
    send(res, 404, { errors: ['Not found: ' + path] });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  jm.port = (server.address() as AddressInfo).port;
  jm.url = `http://127.0.0.1:${jm.port}`;
  jm.stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return jm;
}
