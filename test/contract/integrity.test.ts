import { createHash, randomBytes } from 'node:crypto';
import { azurePlugin } from '../../fs-plugins/azure';
import { s3Plugin } from '../../fs-plugins/s3';
import { fixtureService, startAzurite, uploadBlob } from '../servers/azurite';
import { putObject, startS3Server } from '../servers/s3-server';
import { pluginFileSystem } from './plugin-fixtures';

/**
 * The stores' own checksums travel with whole-object reads so the fetcher can verify the bytes end to
 * end (S3: a single-part ETag is the MD5; Azure: the blob's Content-MD5). Ranged reads make no claim.
 */
describe('store checksums for end-to-end verification', () => {
  const bytes = randomBytes(300_000);
  const md5 = createHash('md5').update(bytes).digest('hex');

  it('S3 reports the single-part ETag as MD5', async () => {
    const creds = { accessKeyId: 'AKIDINT', secretAccessKey: 'integrity-secret' };
    const s3 = await startS3Server({ keys: { [creds.accessKeyId]: creds.secretAccessKey }, buckets: ['b'] });
    const fs = pluginFileSystem(
      s3Plugin,
      { 's3.endpoint': s3.url, 's3.path.style.access': 'true', 's3.access-key': creds.accessKeyId, 's3.secret-key': creds.secretAccessKey },
      [`127.0.0.1:${s3.port}`],
    );
    try {
      await putObject(s3.url, creds, 'b', 'x.jar', bytes);
      const whole = await fs.open(new URL('s3://b/x.jar'), { signal: AbortSignal.timeout(10_000) });
      for await (const _ of whole.stream) void _;
      expect(whole.stat.integrity).toEqual({ algorithm: 'md5', expected: md5 });
      const part = await fs.open(new URL('s3://b/x.jar'), { signal: AbortSignal.timeout(10_000), range: { start: 0, end: 9 } });
      for await (const _ of part.stream) void _;
      expect(part.stat.integrity).toBeUndefined();
    } finally {
      await fs.close();
      await s3.stop();
    }
  });

  it('Azure reports the blob Content-MD5', async () => {
    const account = { name: 'intacct', key: randomBytes(64).toString('base64') };
    const azurite = await startAzurite({ accounts: [account] });
    const fs = pluginFileSystem(
      azurePlugin,
      {
        [`fs.azure.account.key.${account.name}.blob.core.windows.net`]: account.key,
        [`fs.azure.account.endpoint.${account.name}`]: azurite.blobUrl(account.name),
      },
      [`127.0.0.1:${azurite.port}`],
    );
    try {
      // Put Blob as a publisher does it: with Content-MD5, which Azure stores with the blob.
      await uploadBlob(azurite, account, 'jars', 'placeholder.jar', Buffer.from('x'));
      const container = fixtureService(azurite, account).getContainerClient('jars');
      await container
        .getBlockBlobClient('x.jar')
        .upload(bytes, bytes.length, { blobHTTPHeaders: { blobContentMD5: createHash('md5').update(bytes).digest() } });
      const whole = await fs.open(new URL(`wasbs://jars@${account.name}.blob.core.windows.net/x.jar`), {
        signal: AbortSignal.timeout(10_000),
      });
      for await (const _ of whole.stream) void _;
      expect(whole.stat.integrity).toEqual({ algorithm: 'md5', expected: md5 });
    } finally {
      await fs.close();
      await azurite.stop();
    }
  });
});
