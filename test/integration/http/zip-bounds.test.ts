import { httpPlugin } from '../../../fs-plugins/http';
import { json, uploadBytes } from '../../helpers/flink';
import { startGateway, type TestGateway } from '../../helpers/gateway';
import { craftZip } from '../../helpers/hostile-jars';
import { buildJar } from '../../helpers/jars';
import { startFakeJobManager, type FakeJobManager } from '../../servers/fake-jobmanager';
import { startHttpOrigin, type HttpOrigin } from '../../servers/http-origin';

const MANIFEST = 'Manifest-Version: 1.0\nMain-Class: a.B\n';
const GENUINE = buildJar({ 'META-INF/MANIFEST.MF': MANIFEST, 'a/B.class': 'x', 'a/C.class': 'y' });
/** Hostile jars of a few hundred bytes each: their end records and headers claim what they are not. */
const HOSTILE: [string, Buffer, RegExp][] = [
  [
    '4 billion entries (zip64)',
    craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }], zip64: { entries: 2n ** 32n } }),
    /declares 4294967296 entries, more than gateway\.artifacts\.max-zip-entries \(500000\); if the jar is genuine, raise gateway\.artifacts\.max-zip-entries/,
  ],
  [
    'a 4 GiB central directory',
    craftZip({ entries: [{ name: 'META-INF/MANIFEST.MF', data: MANIFEST }], eocdCdSize: 0xfffffff0 }),
    /more than gateway\.artifacts\.max-central-directory-size \(67108864 bytes\)/,
  ],
  // Declares 100 kB, inflates to 16 MiB: refused by upload as by URI.
  [
    'a manifest that lies about its size (a bomb)',
    craftZip({
      entries: [
        { name: 'META-INF/MANIFEST.MF', data: Buffer.alloc(16 * 1024 * 1024, 0x61), deflate: true, declaredSize: 100_000 },
        { name: 'a/B.class', data: 'x' },
      ],
    }),
    /does not inflate to its declared 100000 bytes/,
  ],
  [
    'a manifest declared at 2 GiB',
    craftZip({
      entries: [
        { name: 'META-INF/MANIFEST.MF', data: MANIFEST, declaredSize: 2 * 1024 ** 3 },
        { name: 'a/B.class', data: 'x' },
      ],
    }),
    /META-INF\/MANIFEST\.MF of 2147483648 bytes uncompressed, more than gateway\.artifacts\.max-manifest-size/,
  ],
];

function expectEnvelope(r: { status: number; body: Record<string, unknown> }, code: string, text: RegExp) {
  expect(r.status).toBe(400);
  expect(Object.keys(r.body)).toEqual(['errors']);
  const errors = r.body.errors as string[];
  expect(errors).toHaveLength(1);
  expect(errors[0]).toMatch(new RegExp(`^${code}: `));
  expect(errors[0]).toMatch(text);
}

/**
 * Hostile zip structure through a real gateway, in front of a fake JobManager that keeps whatever
 * upload it completes: every hostile jar gets 400 in Flink's envelope naming the limit, and none is
 * kept on the JobManager, whether uploaded or fetched from a node:http origin.
 */
describe('zip-structure bounds through the gateway (fake JobManager, node:http origin)', () => {
  let jm: FakeJobManager;
  let origin: HttpOrigin;
  let gw: TestGateway;
  let strict: TestGateway;

  beforeAll(async () => {
    jm = await startFakeJobManager();
    origin = await startHttpOrigin({
      files: { '/genuine.jar': GENUINE, ...Object.fromEntries(HOSTILE.map(([, bytes], i) => [`/hostile-${i}.jar`, bytes])) },
    });
    const fetching = {
      'web.submit.jar-uri.enable': 'true',
      'gateway.artifacts.allowed-schemes': 'http',
      'user.artifacts.raw-http-enabled': 'true',
      'gateway.artifacts.restricted-hosts.allowed': `127.0.0.1:${origin.port}`,
      'gateway.artifacts.fetch-retries': '0',
    };
    gw = await startGateway(jm.url, fetching, [httpPlugin]);
    strict = await startGateway(jm.url, { ...fetching, 'gateway.artifacts.max-zip-entries': '2' }, [httpPlugin]);
  });

  afterAll(async () => {
    await gw?.close();
    await strict?.close();
    await origin?.stop();
    await jm?.stop();
  });

  it.each(HOSTILE)('an upload with %s is refused with 400, never kept on the JobManager, and logged at info', async (name, bytes, text) => {
    const before = jm.jars.size;
    const jar = `hostile-${name.replace(/\W+/g, '-')}.jar`;
    expectEnvelope(await uploadBytes(gw.url, [{ name: jar, bytes }]), 'GW_UPLOAD_NOT_ZIP', text);
    expect(jm.jars.size).toBe(before);
    const logged = gw.logs.filter((l) => l.jar === jar);
    expect(logged).toEqual([
      expect.objectContaining({
        level: 30,
        msg: 'upload refused: over a zip-structure bound',
        limit: expect.stringMatching(/^gateway\.artifacts\.max-/),
      }),
    ]);
  });

  it.each(HOSTILE.map((h, i) => [h[0], i, h[2]] as const))(
    'a fetched jar with %s is refused with 400, before it is cached or handed off',
    async (_name, i, text) => {
      const before = jm.jars.size;
      expectEnvelope(await json('POST', `${gw.url}/jars/fetch`, { uri: `${origin.url}/hostile-${i}.jar` }), 'GW_FETCH_NOT_JAR', text);
      expect(jm.jars.size).toBe(before);
      // Not cached either: the same URI is downloaded (and refused) again.
      const gets = () => origin.requests.filter((r) => r.method === 'GET' && r.path === `/hostile-${i}.jar`).length;
      const seen = gets();
      expect((await json('POST', `${gw.url}/jars/fetch`, { uri: `${origin.url}/hostile-${i}.jar` })).status).toBe(400);
      expect(gets()).toBe(seen + 1);
    },
  );

  it('a lowered gateway.artifacts.max-zip-entries refuses a genuine 3-entry jar, uploaded or fetched; the default gateway takes it', async () => {
    const before = jm.jars.size;
    expectEnvelope(
      await uploadBytes(strict.url, [{ name: 'genuine.jar', bytes: GENUINE }]),
      'GW_UPLOAD_NOT_ZIP',
      /declares 3 entries, more than gateway\.artifacts\.max-zip-entries \(2\)/,
    );
    expectEnvelope(
      await json('POST', `${strict.url}/jars/fetch`, { uri: `${origin.url}/genuine.jar` }),
      'GW_FETCH_NOT_JAR',
      /gateway\.artifacts\.max-zip-entries \(2\)/,
    );
    expect(jm.jars.size).toBe(before);
    expect(await uploadBytes(gw.url, [{ name: 'genuine.jar', bytes: GENUINE }])).toMatchObject({
      status: 200,
      body: { status: 'success' },
    });
    expect(await json('POST', `${gw.url}/jars/fetch`, { uri: `${origin.url}/genuine.jar` })).toMatchObject({
      status: 200,
      body: { status: 'success' },
    });
    expect(jm.jars.size).toBe(before + 2);
  });
});
