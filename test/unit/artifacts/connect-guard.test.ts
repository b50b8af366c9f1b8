import { createConnectGuard, isRestrictedAddress } from '../../../src/artifacts/connect-guard';
import { handoffName } from '../../../src/artifacts/uri-policy';
import { redactUri } from '../../../src/artifacts/uri';

describe('restricted addresses (SSRF guard)', () => {
  it.each([
    '127.0.0.1', '10.1.2.3', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1', '255.255.255.255',
    '::1', '::', 'fd00:ec2::254', 'fe80::1', 'ff02::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::169.254.169.254', '::ffff:10.0.0.1',
  ])('%s is restricted', (a) => expect(isRestrictedAddress(a)).toBe(true));

  it.each(['8.8.8.8', '140.82.112.3', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])('%s is public', (a) => expect(isRestrictedAddress(a)).toBe(false));

  it('refuses an IP literal unless its host:port is exempt', () => {
    const guard = createConnectGuard({ enabled: true, allowed: ['127.0.0.1:9000'] });
    expect(() => guard.checkHost('127.0.0.1', 9001)).toThrow(expect.objectContaining({ code: 'GW_FETCH_RESTRICTED_HOST' }));
    expect(() => guard.checkHost('127.0.0.1', 9000)).not.toThrow();
    expect(() => guard.checkHost('[::1]', 9000)).toThrow(expect.objectContaining({ code: 'GW_FETCH_RESTRICTED_HOST' }));
  });

  it('checks names on the resolved address at lookup time', async () => {
    const guard = createConnectGuard({ enabled: true, allowed: [] });
    const err = await new Promise<unknown>((resolve) => guard.lookupFor(443)('localhost', {}, (e) => resolve(e)));
    expect(err).toMatchObject({ code: 'GW_FETCH_RESTRICTED_HOST' });
    const exempt = createConnectGuard({ enabled: true, allowed: ['localhost:443'] });
    const ok = await new Promise<unknown>((resolve) => exempt.lookupFor(443)('localhost', {}, (e, addr) => resolve(e ?? addr)));
    expect(String(ok)).toMatch(/127\.0\.0\.1|::1/);
  });
});

describe('URI helpers', () => {
  it('redacts userinfo, query and fragment', () => {
    expect(redactUri('https://u:p@host:8443/a/b.jar?sig=SECRET#x')).toBe('https://host:8443/a/b.jar');
  });
  it.each([
    ['s3://b/path/app-1.0.jar?versionId=3', 'app-1.0.jar'],
    ['https://h/download?file=1', 'download.jar'],
    ['https://h/a/my%20job.jar', 'my_job.jar'],
    ['https://h/..%2F..%2Fetc%2Fpasswd', '_.._etc_passwd.jar'],
  ])('names the hand-off of %s as %s', (uri, name) => expect(handoffName(new URL(uri))).toBe(name));
});

describe('redactUri for Azure URIs', () => {
  it('keeps the container, which sits where userinfo would', () => {
    expect(redactUri('wasbs://jars@acct.blob.core.windows.net/dir/app.jar?sv=1&sig=SECRET')).toBe('wasbs://jars@acct.blob.core.windows.net/dir/app.jar');
  });
});
