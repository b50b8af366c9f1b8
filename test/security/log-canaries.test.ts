// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { randomBytes } from 'node:crypto';
import { httpPlugin } from '../../fs-plugins/http';
import { startGateway, type TestGateway } from '../helpers/gateway';
import { startOrigin, type Origin } from '../helpers/origin';

/**
 * A class of hole (ADR 0009): what a client or a job's code puts into a request or an
 * answer — query strings (signed URLs carry their signature there), URI userinfo, the message a job's
 * main() throws — never reaches the gateway's log. The client that sent it may still see it.
 */

const canary = (what: string) => `canary-${what}-${randomBytes(8).toString('hex')}`;
const MAIN = canary('main');
const QUERY = canary('query');
const USERINFO = canary('userinfo');
const FRAGMENT = canary('fragment');

describe('the log holds no query string, userinfo or job message', () => {
  let jm: Origin;
  let gw: TestGateway;

  beforeAll(async () => {
    jm = await startOrigin((req, res) => {
      req.resume();
      if (req.method === 'POST' && /\/run$/.test(req.url ?? '')) {
        // What Flink answers when a job's main() throws: the exception's message, verbatim.
        res.writeHead(400, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            errors: [`org.apache.flink.client.program.ProgramInvocationException: The main method caused an error: ${MAIN}`],
          }),
        );
        return;
      }
      if (req.method === 'POST' && /\/plan$/.test(req.url ?? '')) {
        res.writeHead(500, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            errors: [`Internal server error.`, `<Exception on server side:\njava.lang.RuntimeException: ${MAIN}\n\tat x.Y.main(Y.java:1)>`],
          }),
        );
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: ['Not found'] }));
    });
    gw = await startGateway(jm.url, { 'web.submit.jar-uri.enable': 'true', 'gateway.artifacts.allowed-schemes': 'https' }, [httpPlugin]);
  });
  afterAll(async () => {
    await gw.close();
    await jm.close();
  });

  it('after runs whose main() throws, unknown routes with signed queries and URIs with userinfo', async () => {
    const answers: string[] = [];
    const send = async (method: string, path: string, body?: unknown) => {
      const r = await fetch(`${gw.url}${path}`, {
        method,
        ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      });
      answers.push(await r.text());
      return r.status;
    };
    /** The status and the gateway code of the last answer. */
    const coded = async (method: string, path: string, body?: unknown) => {
      const status = await send(method, path, body);
      return `${status} ${/^\{"errors":\["(GW_[A-Z_]+):/.exec(answers.at(-1) ?? '')?.[1] ?? 'no code'}`;
    };
    expect(await send('POST', '/v1/jars/abc_x.jar/run', {})).toBe(400);
    expect(await coded('POST', '/v1/jars/abc_x.jar/plan', {})).toBe('400 GW_JAR_INVALID');
    expect(await send('GET', `/jars/x/y/z?X-Amz-Signature=${QUERY}`)).toBe(404);
    expect(await send('GET', `/gateway/v1/nothing?sig=${QUERY}`)).toBe(404);
    expect(await send('GET', `/v1/jobs/overview?sig=${QUERY}`)).toBe(404);
    expect(
      await coded('POST', `/v1/jars/fetch?sig=${QUERY}`, { uri: `https://user:${USERINFO}@127.0.0.1:1/app.jar?sig=${QUERY}#${FRAGMENT}` }),
    ).toBe('400 GW_FETCH_URI_INVALID');
    expect(
      await coded('POST', '/v1/jars/abc_x.jar/run', {
        flinkConfiguration: { 'user.artifacts.job-jar': `https://127.0.0.1:1/app.jar?X-Amz-Signature=${QUERY}` },
      }),
    ).toBe('400 GW_FETCH_RESTRICTED_HOST');
    // The client was told what its job said (Flink does the same) ...
    expect(answers.join('\n')).toContain(MAIN);
    // ... and the log holds none of it.
    const log = JSON.stringify(gw.logs);
    for (const c of [MAIN, QUERY, USERINFO, FRAGMENT])
      expect({ canary: c.split('-')[1], inLog: log.includes(c) }).toEqual({ canary: c.split('-')[1], inLog: false });
    expect(log).toContain('not logged');
  });
});
