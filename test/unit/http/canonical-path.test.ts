import { classify, isBareJarId, isGatewayFetch, pathViews } from '../../../src/http/canonical-path';

describe('classify', () => {
  it.each([
    ['GET', '/jars', 'list'],
    ['GET', '/v1/jars', 'list'],
    ['GET', '/v1/jars/', 'list'],
    ['POST', '/jars/upload', 'upload'],
    ['POST', '//v1//jars/upload', undefined],
    ['DELETE', '/v1/jars/abc_x.jar', 'delete'],
    ['POST', '/v1/jars/abc_x.jar/run', 'run'],
    ['POST', '/jars/abc_x.jar/run/', 'run'],
    ['GET', '/jars/abc_x.jar/plan', 'plan'],
    ['POST', '/v1/jars/abc_x.jar/plan', 'plan'],
    ['POST', '/v1/jars/abc_x.jar/run-application', 'run-application'],
    // Flink decodes once, so these are runs for Flink too: handled, never passed through.
    ['POST', '/v1/jars/abc_x.jar/%72un', 'run'],
    ['POST', '/v1%2Fjars%2Fabc_x.jar%2Frun', 'run'],
    // Flink's Router decodes every segment a second time, so double-encoded names route too.
    ['POST', '/v1/jars/abc/%2572un', 'run'],
    ['POST', '/%256Aars/upload', 'upload'],
  ])('%s %s is the jar route %s', (method, path, route) => {
    const c = classify(method, path);
    if (route === undefined) expect(c.kind).toBe('jar-not-found');
    else expect(c).toMatchObject({ kind: 'jar', route });
  });

  it('takes the jar id from the path, decoded once', () => {
    expect(classify('POST', '/jars/5f4c_my%20job.jar/run')).toMatchObject({ route: 'run', jarId: '5f4c_my job.jar' });
  });

  it.each([
    '/jars/abc%252F..%252Fx/run', // Flink: one segment "abc/../x"; canonical: three segments
    '/jars/a%252Fb/run',
    '/jars/x%3F/run', // no single meaning at all: see pathViews
  ])('refuses %s whose encodings disagree on a jar route', (path) => {
    expect(classify('POST', path).kind).toBe('jar-noncanonical');
  });

  it.each([
    ['GET', '/jars/upload/extra'],
    ['GET', '/jars/upload'],
    ['GET', '/v1/jars/abc_x.jar/run'],
    ['PUT', '/jars/abc_x.jar/plan'],
    ['GET', '/jars/abc_x.jar/run-application'],
    ['POST', '/jars/abc_x.jar/run/extra'],
    ['GET', '/jars/./x'],
  ])('keeps the code-running routes by name, and paths with dot segments: %s %s is a 404 of the gateway', (method, path) => {
    expect(classify(method, path).kind).toBe('jar-not-found');
  });

  it.each([
    ['GET', '/jars/x/y/z'],
    ['GET', '/v1/jars/abc_x.jar'],
    ['POST', '/v1/jars/abc_x.jar/future-route'],
    ['GET', '/jars/abc_x.jar/details'],
    ['GET', '/jars/fetch'],
  ])('passes a /jars route it does not know through to the JobManager: %s %s', (method, path) => {
    expect(classify(method, path).kind).toBe('pass-through');
  });

  it('still refuses an unknown /jars path whose encodings disagree', () => {
    expect(classify('GET', '/jars/a%252Fb/details').kind).toBe('jar-noncanonical');
  });

  it("knows the gateway's own fetch route only as POST /gateway/v1/jars/fetch, spelled one way", () => {
    expect(isGatewayFetch('POST', '/gateway/v1/jars/fetch')).toBe(true);
    expect(isGatewayFetch('POST', '/gateway/v1/jars/fetch/')).toBe(true);
    expect(isGatewayFetch('GET', '/gateway/v1/jars/fetch')).toBe(false);
    expect(isGatewayFetch('POST', '/gateway/v1/jars/%252Ffetch')).toBe(false);
    expect(isGatewayFetch('POST', '/v1/jars/fetch')).toBe(false);
  });

  it.each(['/overview', '/v1/jobs/overview', '/', '/index.html', '/jobs/..%2F..%2Fx', '/V1/jars'])('passes %s through', (path) => {
    expect(classify('GET', path).kind).toBe('pass-through');
  });

  it('splits a once-decoded %2F like Flink does, so traversal cannot hide a segment', () => {
    expect(classify('DELETE', '/jars/..%2F..%2Fetc%2Fpasswd').kind).toBe('jar-not-found');
  });
});

describe('jar ids', () => {
  it.each(['..', '.', 'a\\b', 'a\u0000b', '', 'a?b', 'a#b', '%', 'a%3Fb'])('rejects %j', (id) => expect(isBareJarId(id)).toBe(false));
  it('accepts Flink ids', () => expect(isBareJarId('5f4c3d2e-1a2b-4c5d-8e9f-0a1b2c3d4e5f_TopSpeedWindowing.jar')).toBe(true));
  it('decodes until stable', () => expect(pathViews('/a%25252Fb')).toMatchObject({ ok: true, canonical: ['a', 'b'] }));
});

describe('pathViews: exactly the route Flink takes, or a refusal', () => {
  it("models Netty (decode once) then Flink's Router (split, decode each segment again)", () => {
    expect(pathViews('/jobs/abc/yarn%252Dcancel')).toEqual({
      ok: true,
      flink: ['jobs', 'abc', 'yarn-cancel'],
      canonical: ['jobs', 'abc', 'yarn-cancel'],
    });
    expect(pathViews('/jars/a%252Fb/run')).toEqual({ ok: true, flink: ['jars', 'a/b', 'run'], canonical: ['jars', 'a', 'b', 'run'] });
    expect(pathViews('/v1%2Fjobs')).toEqual({ ok: true, flink: ['v1', 'jobs'], canonical: ['v1', 'jobs'] });
  });

  const refused: string[] = [];
  for (const prefix of ['/jobs/0123456789abcdef0123456789abcdef/yarn-cancel', '/v1/jobs', '/jars/x.jar/run', '/jars', '/overview']) {
    for (const trick of [
      '%3F',
      '%3f',
      '%253F',
      '%25253f',
      '%23',
      '%2523',
      '#',
      '#x',
      '%3Fx=1',
      '%00',
      '%0a',
      '%7F',
      '%2500',
      '%FF',
      '%C0%AF',
      '%E2%82',
      '%zz',
      '%',
      '%2',
      '%25zz',
      '%ED%A0%80',
    ]) {
      refused.push(`${prefix}${trick}`);
      refused.push(`${prefix}${trick}/`);
    }
  }
  refused.push('/jars%2F%FF/run', `/x${'%25'.repeat(9)}41`);
  it.each(refused)('refuses %s', (path) => {
    expect(pathViews(path).ok).toBe(false);
  });

  it.each([
    '/jobs/overview',
    '/jars/5f4c_my%20job.jar/run',
    '/v1/jobs/0123456789abcdef0123456789abcdef',
    '/%E2%82%AC',
    '/web/assets/index-abc.js',
  ])('accepts %s', (path) => {
    expect(pathViews(path).ok).toBe(true);
  });
});
