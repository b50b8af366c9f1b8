import { parseJarRequest } from '../../../src/submission/run-request';
import { runFingerprint } from '../../../src/submission/job-claims';

/**
 * Fidelity item 3: values Flink's Jackson accepts in a run or plan body, checked by hand against the
 * embedded Flink 2.1's /jars/:id/run and /plan (200 or "Request did not match expected format").
 */
const parse = (body: Record<string, unknown>) => parseJarRequest(body, 'JarRunRequestBody').body;
const refused = (body: Record<string, unknown>) =>
  expect(() => parse(body)).toThrow(expect.objectContaining({ code: 'GW_REQUEST_MALFORMED' }));

describe('lenient values, as Flink takes them', () => {
  it.each([
    [{ parallelism: '' }, {}],
    [{ parallelism: '4' }, { parallelism: 4 }],
    [{ parallelism: ' 4 ' }, { parallelism: 4 }],
    [{ parallelism: 4.5 }, { parallelism: 4 }],
    [{ parallelism: 1.9 }, { parallelism: 1 }],
    [{ allowNonRestoredState: 'TRUE' }, { allowNonRestoredState: true }],
    [{ allowNonRestoredState: 'False' }, { allowNonRestoredState: false }],
    [{ allowNonRestoredState: '' }, {}],
    [{ allowNonRestoredState: 1 }, { allowNonRestoredState: true }],
    [{ allowNonRestoredState: 2 }, { allowNonRestoredState: true }],
    [{ allowNonRestoredState: 0 }, { allowNonRestoredState: false }],
  ])('%j is %j', (body, expected) => expect(parse(body)).toEqual(expected));

  it.each([
    [{ parallelism: '4.5' }],
    [{ parallelism: true }],
    [{ allowNonRestoredState: 'yes' }],
    [{ allowNonRestoredState: '1' }],
    [{ allowNonRestoredState: 1.5 }],
    [{ programArgsList: 'x' }],
  ])('%j is refused, as Flink refuses it', (body) => refused(body));
});

describe('Flink 2.3 JarRunApplicationRequestBody', () => {
  it('takes applicationId as 32 hex (lower-cased) and refuses anything else', () => {
    expect(parseJarRequest({ applicationId: 'AB'.repeat(16) }, 'JarRunApplicationRequestBody').body.applicationId).toBe('ab'.repeat(16));
    expect(() => parseJarRequest({ applicationId: 'app-1' }, 'JarRunApplicationRequestBody')).toThrow(
      /JarRunApplicationRequestBody: applicationId must be 32 hexadecimal/,
    );
  });

  it('a /run and a /run-application of the same body are different requests for job-id ownership', () => {
    const req = parseJarRequest({ jobId: 'a'.repeat(32) }, 'JarRunRequestBody');
    expect(runFingerprint('x.jar', req, 'p', '', 'run-application')).not.toBe(runFingerprint('x.jar', req, 'p', ''));
    expect(runFingerprint('x.jar', req, 'p', '', 'run')).toBe(runFingerprint('x.jar', req, 'p', ''));
  });
});
