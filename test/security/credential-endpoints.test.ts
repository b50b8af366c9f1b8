import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { createServer as createHttpServer, type IncomingHttpHeaders } from 'node:http';
import type { AccessToken, TokenCredential } from '@azure/identity';
import pino from 'pino';
import { AzureFileSystem, azurePlugin } from '../../fs-plugins/azure';
import { httpPlugin } from '../../fs-plugins/http';
import { s3Plugin } from '../../fs-plugins/s3';
import { createConnectGuard } from '../../src/artifacts/connect-guard';
import type { FileSystem } from '../../src/artifacts/fs-plugin';
import { OptionsRegistry, type RawEntry } from '../../src/config/registry';
import { pluginFileSystem } from '../contract/plugin-fixtures';

/**
 * Security review finding 1 and its class: a credential of the cluster (Azure key, SAS or identity
 * token, S3 signature, configured HTTP headers) goes only to the store endpoint it belongs to, never
 * to a host a URI names. Every listener here is one an attacker would run; the guard exempts them
 * (the worst case: an administrator who allowed loopback), so only the credential rule stands between
 * a submitter's URI and the cluster's secrets. Each case counts connections and credential uses.
 */

/** A TCP listener that counts connections (TLS or not, nothing useful is answered). */
async function countingListener(host = '127.0.0.1'): Promise<{ port: number; accepted: () => number; stop: () => Promise<void> }> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('error', () => {});
    s.once('close', () => sockets.delete(s));
    s.end();
  });
  await new Promise<void>((r) => server.listen(0, host, () => r()));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    stop: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A stand-in for the pod identity (DefaultAzureCredential): it counts who asked for a token. */
function countingCredential(): TokenCredential & { calls: number } {
  const cred = {
    calls: 0,
    async getToken(): Promise<AccessToken> {
      cred.calls++;
      return { token: 'identity-token-canary', expiresOnTimestamp: Date.now() + 3_600_000 };
    },
  };
  return cred;
}

const raw = (settings: Record<string, string>) => new Map<string, RawEntry>(Object.entries(settings).map(([k, v]) => [k, { value: v, source: 'test' }]));

function azureFs(settings: Record<string, string>, allowed: string[], credential: TokenCredential): FileSystem {
  return new AzureFileSystem(
    { config: new OptionsRegistry(azurePlugin.options, azurePlugin.rules).resolve(raw(settings)), log: pino({ level: 'silent' }), guard: createConnectGuard({ enabled: true, allowed }) },
    () => credential,
  );
}

const outcome = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code ?? String(e));

describe('Azure: the cluster identity, keys and SAS go only to Azure Storage or a configured endpoint', () => {
  let trap: Awaited<ReturnType<typeof countingListener>>;
  beforeAll(async () => {
    trap = await countingListener();
  });
  afterAll(() => trap.stop());

  const hostile = (port: number): string[] => {
    const out: string[] = [];
    for (const scheme of ['wasbs', 'wasb', 'abfss', 'abfs']) {
      for (const host of [
        `127.0.0.1:${port}`,
        `localhost:${port}`,
        `[::ffff:127.0.0.1]:${port}`,
        `attacker.example:${port}`,
        `clustera.blob.core.windows.net.attacker.example:${port}`,
        `clustera.blob.core.windows.net.127.0.0.1.nip.io:${port}`,
        `clusterablob.core.windows.net`,
        `clustera.blob.core.windows.net%2f.attacker.example`,
        `clustera.blob.core.windows.nets`,
        `clustera.dfs.core.windows.net-attacker.example`,
        `clustera.web.core.windows.net`,
        `x.blob.core.windows.net`,
        `clustera.queue.core.windows.net`,
      ]) {
        out.push(`${scheme}://jars@${host}/apps/a.jar`);
      }
    }
    return out;
  };

  it('refuses every URI whose host is not Azure Storage, before any connection or token request', async () => {
    const cred = countingCredential();
    const fs = azureFs({}, [`127.0.0.1:${trap.port}`, `[::ffff:127.0.0.1]:${trap.port}`, `localhost:${trap.port}`], cred);
    const uris = hostile(trap.port);
    const results: Record<string, string> = {};
    for (const u of uris) {
      results[u] = await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)));
      results[`open ${u}`] = await outcome(fs.open(new URL(u), { signal: AbortSignal.timeout(10_000) }));
    }
    await fs.close();
    expect(Object.entries(results).filter(([, code]) => code !== 'GW_FETCH_URI_INVALID')).toEqual([]);
    expect(uris.length).toBeGreaterThanOrEqual(50);
    expect({ connections: trap.accepted(), tokenRequests: cred.calls }).toEqual({ connections: 0, tokenRequests: 0 });
  });

  it('with an account key or SAS configured for the real account, a look-alike host gets neither', async () => {
    const cred = countingCredential();
    const key = Buffer.from('k'.repeat(64)).toString('base64');
    const fs = azureFs(
      { 'fs.azure.account.key.clustera.blob.core.windows.net': key, 'fs.azure.sas.jars.clustera.blob.core.windows.net': 'sv=2024&sig=canary' },
      [`127.0.0.1:${trap.port}`],
      cred,
    );
    for (const u of hostile(trap.port)) expect(await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)))).toBe('GW_FETCH_URI_INVALID');
    await fs.close();
    expect({ connections: trap.accepted(), tokenRequests: cred.calls }).toEqual({ connections: 0, tokenRequests: 0 });
  });

  it('with fs.azure.account.endpoint.<account> set, only that account host or the endpoint host is served', async () => {
    const cred = countingCredential();
    const endpoint = `https://127.0.0.1:${trap.port}/clustera`;
    const fs = azureFs({ 'fs.azure.account.endpoint.clustera': endpoint }, [`127.0.0.1:${trap.port}`], cred);
    for (const host of ['clustera.attacker.example', 'clustera.blob.core.windows.net.attacker.example', 'clustera']) {
      expect(await outcome(fs.stat(new URL(`wasbs://jars@${host}/a.jar`), AbortSignal.timeout(10_000)))).toBe('GW_FETCH_URI_INVALID');
    }
    expect(trap.accepted()).toBe(0);
    // The control: the real account host goes to the configured endpoint, with the identity.
    const before = trap.accepted();
    const control = await outcome(fs.stat(new URL('wasbs://jars@clustera.blob.core.windows.net/a.jar'), AbortSignal.timeout(10_000)));
    await fs.close();
    expect(control).not.toBe('GW_FETCH_URI_INVALID');
    expect(trap.accepted()).toBeGreaterThan(before);
    expect(cred.calls).toBeGreaterThan(0);
  });
});

describe('S3: a bucket name cannot steer where the signature goes', () => {
  it('refuses bucket names that are not S3 bucket names, before signing or connecting', async () => {
    const trap = await countingListener();
    try {
      const fs = pluginFileSystem(
        s3Plugin,
        { 's3.endpoint': `http://127.0.0.1:${trap.port}`, 's3.access-key': 'AKIACANARY', 's3.secret-key': 'secret-canary', 's3.path.style.access': 'false' },
        [`127.0.0.1:${trap.port}`],
      );
      const buckets = ['a%40attacker.example', 'attacker.example%2F', 'a%3A1', '..', 'a..b', '-a', 'a-', 'a%00b', 'a%23b', 'a%2Fb', 'x'.repeat(300)];
      const results: Record<string, string> = {};
      for (const b of buckets) results[b] = await outcome(fs.stat(new URL(`s3://${b}/k.jar`), AbortSignal.timeout(10_000)));
      expect(Object.entries(results).filter(([, code]) => code !== 'GW_FETCH_URI_INVALID')).toEqual([]);
      expect(trap.accepted()).toBe(0);
      // The control: a valid bucket reaches the configured endpoint (which answers nothing useful).
      const control = await outcome(fs.stat(new URL('s3://jars/k.jar'), AbortSignal.timeout(10_000)));
      await fs.close();
      expect(control).not.toBe('GW_FETCH_URI_INVALID');
      expect(trap.accepted()).toBeGreaterThan(0);
    } finally {
      await trap.stop();
    }
  });
});

describe('HTTP: user.artifacts.http-headers go only to the listed host:port', () => {
  it('sends the headers to no other spelling, port or host', async () => {
    const seen: { host: string; headers: IncomingHttpHeaders }[] = [];
    const server = createHttpServer((req, res) => {
      seen.push({ host: String(req.headers.host), headers: req.headers });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const other = createHttpServer((req, res) => {
      seen.push({ host: String(req.headers.host), headers: req.headers });
      res.writeHead(404).end();
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as AddressInfo).port;
    const otherPort = (other.address() as AddressInfo).port;
    try {
      const fs = pluginFileSystem(
        httpPlugin,
        { 'user.artifacts.raw-http-enabled': 'true', 'user.artifacts.http-headers': 'Authorization:Bearer header-canary', 'gateway.artifacts.http-headers.hosts': `repo.internal:${port}` },
        [`127.0.0.1:${port}`, `127.0.0.1:${otherPort}`],
      );
      for (const u of [`http://127.0.0.1:${port}/a.jar`, `http://127.0.0.1:${otherPort}/a.jar`, `http://2130706433:${port}/a.jar`, `http://0x7f.1:${port}/a.jar`, `http://[::ffff:127.0.0.1]:${port}/a.jar`]) {
        await outcome(fs.stat(new URL(u), AbortSignal.timeout(10_000)));
      }
      await fs.close();
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.filter((s) => s.headers.authorization !== undefined)).toEqual([]);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
      await new Promise<void>((r) => other.close(() => r()));
    }
  });
});
