import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { JobManagerClient } from '../../../src/cluster/jobmanager-client';
import { JobSubmitter } from '../../../src/submission/job-submitter';

const JOB = '0123456789abcdef0123456789abcdef';
/** What a standby JobManager answers GET /v1/jobs/:id with while the leader it forwards to is gone (Flink 2.1.3, seen in the HA failover tests, test/ha/failover-suite.ts). */
const UNREACHABLE = {
  errors: [
    'Internal server error.',
    '<Exception on server side:\norg.apache.flink.runtime.rpc.exceptions.RecipientUnreachableException: Could not send message [RemoteFencedMessage(8259b21f6d6f55bb68cf8c7342964108, RemoteRpcInvocation(RestfulGateway.requestExecutionGraphInfo(JobID, Duration)))] from sender [Actor[pekko://flink/temp/dispatcher_1$l]] to recipient [Actor[pekko.tcp://flink@127.0.0.1:45831/user/rpc/dispatcher_1#-193133629]], because the recipient is unreachable. This can either mean that the recipient has been terminated or that the remote RpcService is currently not reachable.\n\tat org.apache.flink.runtime.rpc.pekko.DeadLettersActor.handleDeadLetter(DeadLettersActor.java:61)\n\nEnd of exception on server side>',
  ],
};

/** Whether the JobManager knows a job, asked during a failover: "not now" is a 503 the client retries, never a 502. */
describe('JobSubmitter.jobKnown (a real HTTP server as the JobManager)', () => {
  let server: Server;
  let answer: { status: number; body: unknown };
  let client: JobManagerClient;

  beforeAll(async () => {
    server = createServer((req, res) => {
      req.resume();
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    client = new JobManagerClient({
      baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      requestTimeoutMs: 5000,
      runTimeoutMs: 5000,
    });
  });
  afterAll(async () => {
    await client.close();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('a standby whose leader is unreachable: 503 GW_CLUSTER_NOT_READY, not 502', async () => {
    answer = { status: 500, body: UNREACHABLE };
    await expect(new JobSubmitter(client, true).jobKnown(JOB)).rejects.toMatchObject({ code: 'GW_CLUSTER_NOT_READY' });
  });

  it('known, unknown and other failures as before', async () => {
    const submitter = new JobSubmitter(client, true);
    answer = { status: 200, body: { jid: JOB, state: 'RUNNING' } };
    await expect(submitter.jobKnown(JOB)).resolves.toBe(true);
    answer = { status: 404, body: { errors: ['Job not found'] } };
    await expect(submitter.jobKnown(JOB)).resolves.toBe(false);
    answer = { status: 500, body: { errors: ['Internal server error.', 'something else broke'] } };
    await expect(submitter.jobKnown(JOB)).rejects.toMatchObject({ code: 'GW_CLUSTER_ERROR' });
  });
});
