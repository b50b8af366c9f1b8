import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { azurePlugin, defaultBlobEndpoint, lazyDefaultCredential, parseAzureUri, resolveAzureAuth } from '../../fs-plugins/azure';
import type { FileSystem } from '../../src/plugin-kit/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { makeSas, startAzurite, uploadBlob, type Azurite, type AzuriteAccount } from '../servers/azurite';
import { fsPluginContract } from './fs-plugin-contract';
import { pluginFileSystem, randomFile, readAll } from './plugin-fixtures';

const ACCT: AzuriteAccount = { name: 'clustera', key: randomBytes(64).toString('base64') };
const WRONG_KEY = randomBytes(64).toString('base64');
const LARGE_SIZE = 64 * 1024 * 1024;
const HOST = `${ACCT.name}.blob.core.windows.net`;
const DFS_HOST = `${ACCT.name}.dfs.core.windows.net`;

const rawOf = (settings: Record<string, string>) =>
  new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));

/** Account key under its WASB (.blob.) name plus the Azurite endpoint override. */
const keyed = (azurite: Azurite, key = ACCT.key) => ({
  [`fs.azure.account.key.${HOST}`]: key,
  [`fs.azure.account.endpoint.${ACCT.name}`]: azurite.blobUrl(ACCT.name),
});

async function failure(p: Promise<unknown>): Promise<{ code?: string | undefined; message: string; json: string }> {
  return p.then(
    () => ({ code: 'resolved', message: '', json: '' }),
    (e: unknown) => ({ code: (e as { code?: string }).code, message: String((e as Error).message), json: JSON.stringify(e) }),
  );
}

fsPluginContract('azure', async () => {
  const azurite = await startAzurite({ accounts: [ACCT] });
  const dir = await mkdtemp(join(tmpdir(), 'azure-contract-'));
  try {
    const content = Buffer.from('PK\u0003\u0004 a small jar-ish blob for the Azure contract');
    await uploadBlob(azurite, ACCT, 'jars', 'apps/small.jar', content);
    const largeFile = join(dir, 'large.bin');
    const sha256 = await randomFile(largeFile, LARGE_SIZE);
    await uploadBlob(azurite, ACCT, 'jars', 'apps/large.jar', largeFile);
    const exempt = [`127.0.0.1:${azurite.port}`];
    const fs = pluginFileSystem(azurePlugin, keyed(azurite), exempt);
    const wrongCredentialsFs = pluginFileSystem(azurePlugin, keyed(azurite, WRONG_KEY), exempt);
    const guardedFs = pluginFileSystem(azurePlugin, keyed(azurite), []);
    return {
      fs,
      wrongCredentialsFs,
      guardedFs,
      small: { uri: new URL(`wasbs://jars@${HOST}/apps/small.jar`), content },
      large: { uri: new URL(`wasbs://jars@${HOST}/apps/large.jar`), size: LARGE_SIZE, sha256 },
      missing: new URL(`wasbs://jars@${HOST}/apps/missing.jar`),
      secrets: [ACCT.key, WRONG_KEY],
      async close() {
        await Promise.all([fs.close(), wrongCredentialsFs.close(), guardedFs.close()]);
        await azurite.stop();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await azurite.stop();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
});

describe('azure plugin specifics', () => {
  let azurite: Azurite;
  let exempt: string[];
  let etag: string;
  const opened: FileSystem[] = [];
  const make = (settings: Record<string, string>, allowed = exempt) => {
    const fs = pluginFileSystem(azurePlugin, settings, allowed);
    opened.push(fs);
    return fs;
  };
  const signal = () => AbortSignal.timeout(30_000);
  const endpoint = () => ({ [`fs.azure.account.endpoint.${ACCT.name}`]: azurite.blobUrl(ACCT.name) });
  const content = Buffer.from('jar bytes for the specifics');

  beforeAll(async () => {
    azurite = await startAzurite({ accounts: [ACCT] });
    exempt = [`127.0.0.1:${azurite.port}`];
    etag = (await uploadBlob(azurite, ACCT, 'jars', 'dir/app.jar', content)).etag!;
    await uploadBlob(azurite, ACCT, 'jars', 'dir/with space+plus.jar', Buffer.from('odd name'));
    await uploadBlob(azurite, ACCT, 'jars', 'big.bin', randomBytes(16 * 1024 * 1024));
  }, 300_000);
  afterAll(async () => {
    await Promise.all(opened.map((fs) => fs.close()));
    await azurite?.stop();
  });

  it('stat reports size, the ETag without quotes and the modification time; a range reports the full size', async () => {
    const fs = make(keyed(azurite));
    const uri = new URL(`wasbs://jars@${HOST}/dir/app.jar`);
    const st = await fs.stat(uri, signal());
    expect(st).toEqual(expect.objectContaining({ size: content.length, etag }));
    expect(st.etag).not.toContain('"');
    expect(Math.abs(st.lastModified! - Date.now())).toBeLessThan(10 * 60_000);
    const { stream, stat } = await fs.open(uri, { signal: signal(), range: { start: 4, end: 8 } });
    expect((await readAll(stream)).equals(content.subarray(4, 9))).toBe(true);
    expect(stat).toEqual(expect.objectContaining({ size: content.length, etag }));
  });

  it('reads a blob whose name has a space and a plus sign', async () => {
    const { stream } = await make(keyed(azurite)).open(new URL(`wasbs://jars@${HOST}/dir/with%20space+plus.jar`), { signal: signal() });
    expect((await readAll(stream)).toString()).toBe('odd name');
  });

  it('reads with a container SAS (fs.azure.sas.<container>.<account>.blob.core.windows.net) and no account key', async () => {
    const sas = makeSas(ACCT, { container: 'jars', expiresOn: new Date(Date.now() + 3600_000) });
    const fs = make({ [`fs.azure.sas.jars.${HOST}`]: sas, ...endpoint() });
    const { stream } = await fs.open(new URL(`wasbs://jars@${HOST}/dir/app.jar`), { signal: signal() });
    expect((await readAll(stream)).equals(content)).toBe(true);
    expect((await fs.stat(new URL(`wasbs://jars@${HOST}/dir/app.jar`), signal())).size).toBe(content.length);
  });

  it('an expired SAS → GW_FETCH_DENIED, with no signature in the message', async () => {
    const sas = makeSas(ACCT, { container: 'jars', startsOn: new Date(Date.now() - 7200_000), expiresOn: new Date(Date.now() - 60_000) });
    const sig = new URLSearchParams(sas).get('sig')!;
    const fs = make({ [`fs.azure.sas.jars.${HOST}`]: sas, ...endpoint() });
    const uri = new URL(`wasbs://jars@${HOST}/dir/app.jar`);
    for (const attempt of [fs.stat(uri, signal()), fs.open(uri, { signal: signal() })]) {
      const f = await failure(attempt);
      expect(f.code).toBe('GW_FETCH_DENIED');
      expect(f.message).toMatch(/\b403\b/);
      for (const text of [f.message, f.json]) {
        expect(text).not.toContain('sig=');
        expect(text).not.toContain(sig);
        expect(text).not.toContain(encodeURIComponent(sig));
      }
    }
  });

  it('maps abfss://container@account.dfs.core.windows.net (and other clouds) to the Blob endpoint', () => {
    const loc = parseAzureUri(new URL(`abfss://jars@${DFS_HOST}/dir/app.jar`));
    expect(loc).toEqual(expect.objectContaining({ account: ACCT.name, container: 'jars', blobName: 'dir/app.jar', blobHost: HOST }));
    expect(defaultBlobEndpoint(loc).href).toBe(`https://${HOST}/`);
    const cn = parseAzureUri(new URL('abfs://jars@acct.dfs.core.chinacloudapi.cn/a.jar'));
    expect(defaultBlobEndpoint(cn).href).toBe('https://acct.blob.core.chinacloudapi.cn/');
    expect(defaultBlobEndpoint(parseAzureUri(new URL('wasb://jars@acct.blob.core.usgovcloudapi.net/a.jar'))).href).toBe(
      'https://acct.blob.core.usgovcloudapi.net/',
    );
  });

  it('abfss:// and abfs:// read through the Blob endpoint', async () => {
    const fs = make(keyed(azurite));
    for (const scheme of ['abfss', 'abfs']) {
      const { stream } = await fs.open(new URL(`${scheme}://jars@${DFS_HOST}/dir/app.jar`), { signal: signal() });
      expect((await readAll(stream)).equals(content)).toBe(true);
    }
  });

  it('wasb:// works', async () => {
    const { stream } = await make(keyed(azurite)).open(new URL(`wasb://jars@${HOST}/dir/app.jar`), { signal: signal() });
    expect((await readAll(stream)).equals(content)).toBe(true);
  });

  it('the .dfs. account-key name works for abfss:// and wasbs:// URIs', async () => {
    const fs = make({ [`fs.azure.account.key.${DFS_HOST}`]: ACCT.key, ...endpoint() });
    for (const uri of [`abfss://jars@${DFS_HOST}/dir/app.jar`, `wasbs://jars@${HOST}/dir/app.jar`]) {
      expect((await fs.stat(new URL(uri), signal())).size).toBe(content.length);
    }
  });

  it('a missing container → GW_FETCH_NOT_FOUND (ContainerNotFound)', async () => {
    const fs = make(keyed(azurite));
    const uri = new URL(`wasbs://nosuchcontainer@${HOST}/dir/app.jar`);
    for (const attempt of [fs.stat(uri, signal()), fs.open(uri, { signal: signal() })]) {
      const f = await failure(attempt);
      expect(f.code).toBe('GW_FETCH_NOT_FOUND');
      expect(f.message).toContain('404');
    }
    expect((await failure(fs.open(uri, { signal: signal() }))).message).toContain('ContainerNotFound');
  });

  it('chooses DefaultAzureCredential when neither an account key nor a SAS is configured (not testable against Azurite)', () => {
    const config = new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(
      rawOf({ [`fs.azure.sas.other.${HOST}`]: 'sv=x&sig=y' }),
    );
    const loc = parseAzureUri(new URL(`wasbs://jars@${HOST}/dir/app.jar`));
    const auth = resolveAzureAuth(config, loc, () => ({ getToken: async () => null }));
    expect(auth.kind).toBe('default-azure-credential');
    // The plugin's own factory builds the real DefaultAzureCredential (lazily, without network I/O).
    const real = resolveAzureAuth(config, loc, lazyDefaultCredential());
    expect(real.credential.constructor.name).toBe('DefaultAzureCredential');
  });

  it('prefers the account key over a container SAS, as Hadoop does', () => {
    const config = new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(
      rawOf({ [`fs.azure.sas.jars.${HOST}`]: 'sv=x&sig=y', [`fs.azure.account.key.${DFS_HOST}`]: ACCT.key }),
    );
    const auth = resolveAzureAuth(config, parseAzureUri(new URL(`wasbs://jars@${HOST}/a.jar`)), () => fail('not needed'));
    expect(auth).toEqual(expect.objectContaining({ kind: 'shared-key', configKey: `fs.azure.account.key.${DFS_HOST}` }));
  });

  it('without credentials, an http endpoint is refused (a token is only sent over https)', async () => {
    const f = await failure(make(endpoint()).open(new URL(`wasbs://jars@${HOST}/dir/app.jar`), { signal: signal() }));
    expect(f.code).toBe('GW_FETCH_DENIED');
  });

  it('the guard also applies to host names: a localhost endpoint is refused unless its host:port is exempted', async () => {
    const settings = {
      [`fs.azure.account.key.${HOST}`]: ACCT.key,
      [`fs.azure.account.endpoint.${ACCT.name}`]: `http://localhost:${azurite.port}/${ACCT.name}`,
    };
    const uri = new URL(`wasbs://jars@${HOST}/dir/app.jar`);
    const refused = await failure(make(settings, []).open(uri, { signal: signal() }));
    expect(refused.code).toBe('GW_FETCH_RESTRICTED_HOST');
    expect(refused.message).toContain(`localhost:${azurite.port}`);
    expect(refused.message).toMatch(/restricted address (?:127\.0\.0\.1|::1);/); // the guard's own error, not a rebuilt one
    const { stream } = await make(settings, [`localhost:${azurite.port}`]).open(uri, { signal: signal() });
    expect((await readAll(stream)).equals(content)).toBe(true);
  });

  it('a refused connection fails fast with GW_FETCH_UNAVAILABLE (no 16 s SDK retry)', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', () => resolve()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const fs = make(
      { [`fs.azure.account.key.${HOST}`]: ACCT.key, [`fs.azure.account.endpoint.${ACCT.name}`]: `http://127.0.0.1:${port}/${ACCT.name}` },
      [`127.0.0.1:${port}`],
    );
    // Baseline from this run on this machine: a fresh pipeline's call that Azurite answers (404).
    const answeredFrom = performance.now();
    await failure(make(keyed(azurite)).stat(new URL(`wasbs://jars@${HOST}/dir/missing.jar`), signal()));
    const answeredMs = performance.now() - answeredFrom;
    const started = performance.now();
    const f = await failure(fs.stat(new URL(`wasbs://jars@${HOST}/dir/app.jar`), signal()));
    expect(f.code).toBe('GW_FETCH_UNAVAILABLE');
    expect(f.message).toContain('ECONNREFUSED');
    // Fast against that baseline: the plugin's three quick tries cost less than a few answered calls
    // plus the SDK default's first back-off alone (4 s, of the 16 s its default retries spend).
    expect(performance.now() - started).toBeLessThan(3 * answeredMs + 4000);
  });

  it('a store that dies mid-stream → GW_FETCH_UNAVAILABLE on the stream, not an SDK error', async () => {
    const own = await startAzurite({ accounts: [ACCT] });
    try {
      await uploadBlob(own, ACCT, 'jars', 'big.bin', randomBytes(32 * 1024 * 1024));
      const fs = make({ [`fs.azure.account.key.${HOST}`]: ACCT.key, [`fs.azure.account.endpoint.${ACCT.name}`]: own.blobUrl(ACCT.name) }, [
        `127.0.0.1:${own.port}`,
      ]);
      const { stream } = await fs.open(new URL(`wasbs://jars@${HOST}/big.bin`), { signal: signal() });
      let received = 0;
      const f = await failure(
        (async () => {
          for await (const c of stream) {
            received += (c as Buffer).length;
            if (received > 1024 * 1024 && own.child.exitCode === null && own.child.signalCode === null) own.child.kill('SIGKILL');
          }
        })(),
      );
      expect(f.code).toBe('GW_FETCH_UNAVAILABLE');
      expect(received).toBeLessThan(32 * 1024 * 1024);
    } finally {
      await own.stop();
    }
  });

  it('rejects URIs without a container or blob, and bad endpoint overrides at start-up', async () => {
    const fs = make(keyed(azurite));
    expect((await failure(fs.stat(new URL(`wasbs://${HOST}/dir/app.jar`), signal()))).code).toBe('GW_FETCH_URI_INVALID');
    expect((await failure(fs.stat(new URL(`wasbs://jars@${HOST}/`), signal()))).code).toBe('GW_FETCH_URI_INVALID');
    expect(() => pluginFileSystem(azurePlugin, { [`fs.azure.account.endpoint.${ACCT.name}`]: 'ftp://example.com/x' }, [])).toThrow(
      expect.objectContaining({ code: 'GW_CONFIG_INVALID' }),
    );
  });

  it('declares every key sensitive except the endpoint', () => {
    const registry = new OptionsRegistry(azurePlugin.options);
    expect(registry.isSensitive(`fs.azure.account.key.${HOST}`)).toBe(true);
    expect(registry.isSensitive(`fs.azure.account.key.${DFS_HOST}`)).toBe(true);
    expect(registry.isSensitive('fs.azure.account.key.acct.blob.core.chinacloudapi.cn')).toBe(true);
    expect(registry.isSensitive(`fs.azure.sas.jars.${HOST}`)).toBe(true);
    expect(registry.lookup(`fs.azure.account.endpoint.${ACCT.name}`)?.sensitive).toBeUndefined();
  });
});
