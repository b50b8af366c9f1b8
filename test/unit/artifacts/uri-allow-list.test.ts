import { parseRule, UriAllowList } from '../../../src/artifacts/uri-allow-list';

const verdict = (entries: string[], uri: string): string => {
  try {
    return new UriAllowList(entries).check(new URL(uri)).verdict;
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
};

describe('gateway.artifacts.allowed-uris', () => {
  it('allows anything when empty', () => {
    expect(verdict([], 's3://any/app.jar')).toBe('not configured');
  });

  it.each([
    // [entry, uri, allowed]
    ['s3://team-a/releases', 's3://team-a/releases/app.jar', true],
    ['s3://team-a/releases', 's3://team-a/releases/1.2/app.jar', true],
    ['s3://team-a/releases', 's3://team-a/releases-old/app.jar', false],
    ['s3://team-a/releases/', 's3://team-a/releases/app.jar', true],
    ['s3://team-a', 's3://team-a/any/app.jar', true],
    ['s3://team-a', 's3://team-a-evil/app.jar', false],
    ['s3://team-a/', 's3://team-b/app.jar', false],
    ['s3://team-a/releases', 's3a://team-a/releases/app.jar', false],
    ['s3://team-a/releases', 's3://team-a/releases/app.jar?versionId=abc', true],
    ['S3://Team-A/releases', 's3://team-a/releases/app.jar', true],
    ['s3://team-a/releases/*.jar', 's3://team-a/releases/app.jar', true],
    ['s3://team-a/releases/*.jar', 's3://team-a/releases/x/app.jar', false],
    ['s3://team-a/releases/**.jar', 's3://team-a/releases/x/y/app.jar', true],
    ['s3://team-a/releases/**.jar', 's3://team-a/releases/x/app.zip', false],
    ['wasbs://jars@acct.blob.core.windows.net/prod', 'wasbs://jars@acct.blob.core.windows.net/prod/app.jar', true],
    ['wasbs://jars@acct.blob.core.windows.net/prod', 'wasbs://other@acct.blob.core.windows.net/prod/app.jar', false],
    ['wasbs://*@acct.blob.core.windows.net/', 'wasbs://other@acct.blob.core.windows.net/app.jar', true],
    ['https://artifacts.example.com/', 'https://ARTIFACTS.example.com:443/lib/app.jar', true],
    ['https://artifacts.example.com/', 'https://artifacts.example.com:8443/lib/app.jar', false],
    ['https://artifacts.example.com/', 'https://artifacts.example.com.evil.org/app.jar', false],
    ['https://artifacts.example.com/', 'https://evil.org/artifacts.example.com/app.jar', false],
    ['https://*.example.com/', 'https://a.b.example.com/app.jar', true],
    ['https://*.example.com/', 'https://example.com.evil.org/app.jar', false],
    ['https://*.example.com/', 'https://evil.org:443@x.example.com/app.jar', false],
    ['https://h.example.com/a/b', 'https://h.example.com/a/b/../../c/app.jar', false],
    ['https://h.example.com/a/b', 'https://h.example.com/a/b/%2e%2e/%2e%2e/c/app.jar', false],
    ['https://h.example.com/a/b', 'https://h.example.com/a/b/..%2f..%2fc/app.jar', false],
    ['https://h.example.com/a/b', 'https://h.example.com/a/b/%5c..%5cc/app.jar', false],
    ['https://h.example.com/a/b', 'https://h.example.com/a/b/x%00.jar', false],
    ['https://h.example.com/a b', 'https://h.example.com/a%20b/app.jar', true],
  ])('%s vs %s → %s', (entry, uri, allowed) => {
    const v = verdict([entry], uri);
    if (allowed) expect(v).toBe(`matched ${entry}`);
    else expect(v).toBe('GW_FETCH_URI_NOT_ALLOWED');
  });

  it('names the submitted URI, the redirect target and the allowed entries, never a query string', () => {
    const list = new UriAllowList(['https://a.example.com/jars/']);
    try {
      list.check(new URL('https://cdn.example.net/x.jar?sig=SECRET'), new URL('https://a.example.com/jars/x.jar?token=SECRET'));
      throw new Error('not refused');
    } catch (err) {
      const e = err as { code: string; message: string };
      expect(e.code).toBe('GW_FETCH_URI_NOT_ALLOWED');
      expect(e.message).toContain('https://a.example.com/jars/x.jar (redirected to https://cdn.example.net/x.jar)');
      expect(e.message).toContain('allows: https://a.example.com/jars/');
      expect(e.message).not.toContain('SECRET');
    }
  });

  it('refuses malformed entries at start', () => {
    expect(() => parseRule('team-a/releases')).toThrow(/not a URI prefix or pattern/);
    expect(() => parseRule('s3://b/%zz')).toThrow(/percent-escape/);
  });
});
