import { unlinkSync } from 'node:fs';
import { buildJar } from '../helpers/jars';
import { errorCode, json, uploadBytes } from '../helpers/flink';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';

const uploadDir = () => process.env.E2E_FLINK_UPLOAD_DIR ?? '';
const JAR = buildJar({ 'META-INF/MANIFEST.MF': 'Manifest-Version: 1.0\nMain-Class: a.B\n', 'a/B.class': 'x' });

/**
 * The jar budget on the real embedded Flink: the gateway learns that a kept jar left the JobManager
 * (here: its file removed from the jar directory, as a JobManager restart empties it) from Flink's
 * own listing, and gives its share back; a delete through the gateway gives it back at once.
 */
describe('jar budget against the real Flink listing', () => {
  let gw: TestGateway;
  const kept: string[] = [];
  beforeAll(async () => {
    gw = await startGateway(flinkUrl(), {
      'web.upload.dir': uploadDir(),
      'gateway.artifacts.handoff': 'shared-dir',
      'gateway.jars.max-count-per-principal': '2',
    });
  });
  afterAll(async () => {
    for (const id of kept) await json('DELETE', `${flinkUrl()}/v1/jars/${id}`).catch(() => undefined);
    await gw?.close();
  });

  it('a jar gone from the jar directory frees its share at the next refusal; a delete frees it at once', async () => {
    const first = await uploadBytes(gw.url, [{ name: 'budget.jar', bytes: JAR }]);
    const second = await uploadBytes(gw.url, [{ name: 'budget.jar', bytes: JAR }]);
    expect([first.status, second.status]).toEqual([200, 200]);
    kept.push(...[first, second].map((r) => String(r.body.filename).split('/').pop()!));
    expect(errorCode(await uploadBytes(gw.url, [{ name: 'budget.jar', bytes: JAR }]))).toBe('GW_JAR_QUOTA');
    // Gone behind the gateway's back: Flink no longer lists it.
    unlinkSync(String(first.body.filename));
    const third = await uploadBytes(gw.url, [{ name: 'budget.jar', bytes: JAR }]);
    expect(third.status).toBe(200);
    kept.push(String(third.body.filename).split('/').pop()!);
    expect(errorCode(await uploadBytes(gw.url, [{ name: 'budget.jar', bytes: JAR }]))).toBe('GW_JAR_QUOTA');
    expect((await json('DELETE', `${gw.url}/v1/jars/${kept[1]}`)).status).toBe(200);
    const fourth = await uploadBytes(gw.url, [{ name: 'budget.jar', bytes: JAR }]);
    expect(fourth.status).toBe(200);
    kept.push(String(fourth.body.filename).split('/').pop()!);
  });
});
