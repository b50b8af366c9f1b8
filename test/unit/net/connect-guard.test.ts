import { createConnectGuard, isRestrictedAddress } from '../../../src/net/connect-guard';
import { handoffName } from '../../../src/artifacts/uri-policy';
import { redactUri } from '../../../src/plugin-kit/uri';

describe('restricted addresses (SSRF guard)', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    'fd00:ec2::254',
    'fe80::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b::169.254.169.254',
    '::ffff:10.0.0.1',
  ])('%s is restricted', (a) => expect(isRestrictedAddress(a)).toBe(true));

  it.each(['8.8.8.8', '140.82.112.3', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808'])('%s is public', (a) =>
    expect(isRestrictedAddress(a)).toBe(false),
  );

  // 6to4 (2002::/16) embeds an IPv4 address in bits 16–47: restricted exactly when that address is.
  it.each([
    ['2002:7f00:1::', '127.0.0.1'],
    ['2002:7f00:0001:0000:0000:0000:0000:0000', '127.0.0.1, uncompressed'],
    ['2002:7f00:1::1.2.3.4', '127.0.0.1, dotted tail'],
    ['2002:a9fe:a9fe::', '169.254.169.254 (cloud metadata)'],
    ['2002:a00:1::1', '10.0.0.1'],
    ['2002:c0a8:101:ffff::1', '192.168.1.1'],
    ['2002:ac1f:ffff::', '172.31.255.255'],
    ['2002::1', '0.0.0.0'],
    ['2002:e000:1::', '224.0.0.1 (multicast)'],
  ])('6to4 %s (embeds %s) is restricted', (a) => expect(isRestrictedAddress(a)).toBe(true));

  it.each([
    ['2002:808:808::1', '8.8.8.8'],
    ['2002:8c52:7003::', '140.82.112.3'],
    ['2002:ac20::1', '172.32.0.0, just past 172.16.0.0/12'],
  ])('6to4 %s (embeds %s) is public', (a) => expect(isRestrictedAddress(a)).toBe(false));

  // Teredo (2001:0::/32) is refused whatever it embeds (server IPv4 in bits 32–63, client IPv4
  // inverted in the last 32 bits): a NAT-traversal tunnel, never a store's address.
  it.each([
    ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'RFC 4380 example: public server and client'],
    ['2001:0:808:808::80ff:fffe', 'client 127.0.0.1 (0x80fffffe inverted)'],
    ['2001:0:7f00:1::', 'server 127.0.0.1'],
    ['2001:0000:0808:0808:0000:0000:f7f7:f7f7', 'uncompressed, client 8.8.8.8'],
    ['2001::', 'the prefix itself'],
  ])('Teredo %s (%s) is restricted', (a) => expect(isRestrictedAddress(a)).toBe(true));

  it.each(['2001:1::1', '2001:4860:4860::8888', '2001:db9::1'])('%s, next to the Teredo prefix, is public', (a) =>
    expect(isRestrictedAddress(a)).toBe(false),
  );

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
    expect(redactUri('wasbs://jars@acct.blob.core.windows.net/dir/app.jar?sv=1&sig=SECRET')).toBe(
      'wasbs://jars@acct.blob.core.windows.net/dir/app.jar',
    );
  });
});
