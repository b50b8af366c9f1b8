import { classify, decodeUntilStable, isBareJarId } from '../../../src/http/canonical-path';

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
  ])('%s %s is the jar route %s', (method, path, route) => {
    const c = classify(method, path);
    if (route === undefined) expect(c.kind).toBe('jar-not-found');
    else expect(c).toMatchObject({ kind: 'jar', route });
  });

  it('takes the jar id from the path, decoded once', () => {
    expect(classify('POST', '/jars/5f4c_my%20job.jar/run')).toMatchObject({ route: 'run', jarId: '5f4c_my job.jar' });
  });

  it.each([
    '/v1/jars/abc/%2572un', // double-encoded: Flink sees "%72un", canonical form sees "run"
    '/%256Aars/upload',
    '/jars/abc%252F..%252Fx/run',
  ])('refuses %s whose encodings disagree on a jar route', (path) => {
    expect(classify('POST', path).kind).toBe('jar-noncanonical');
  });

  it.each(['/jars/upload/extra', '/jars/x/y/z'])('answers 404 for unknown paths under /jars (%s)', (path) => {
    expect(classify('GET', path).kind).toBe('jar-not-found');
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
  it('decodes until stable', () => expect(decodeUntilStable('%25252F')).toBe('/'));
});
