import { httpOptions } from '../../../fs-plugins/http/options';
import { coreOptions } from '../../../src/config/options';
import { OptionsRegistry, type RawEntry } from '../../../src/config/registry';
import { parseDuration, parseMap } from '../../../src/config/types';

/** Fidelity item 10: values as Flink 2.x reads them from a shared config.yaml. */
describe('Flink 2.x value syntax', () => {
  it.each([
    ['PT30S', 30_000],
    ['pt1m30s', 90_000],
    ['P1DT2H', 26 * 3_600_000],
    ['PT0.5S', 500],
    ['1500 µs', 1.5],
    ['1500us', 1.5],
    ['2000000 ns', 2],
    ['30 s', 30_000],
    ['2 min', 120_000],
    ['100', 100],
  ])('duration %s = %d ms', (text, ms) => expect(parseDuration(text)).toBeCloseTo(ms, 6));

  it('refuses what Flink refuses', () => {
    for (const bad of ['P', 'PT', '30 fortnights', 'PT1X']) expect(() => parseDuration(bad)).toThrow();
  });

  it('splits maps like Flink: quoted parts may hold commas and colons, doubled quotes are literal', () => {
    expect(parseMap('Authorization:Basic abc,X-Key:v:1')).toEqual({ Authorization: 'Basic abc', 'X-Key': 'v:1' });
    expect(parseMap("'Authorization:Basic a,b',X-Key:'v,2'")).toEqual({ Authorization: 'Basic a,b', 'X-Key': 'v,2' });
    expect(parseMap('"X-Quote:it\'\'s","X-Dq:say ""hi"""')).toEqual({ 'X-Quote': "it''s", 'X-Dq': 'say "hi"' });
    expect(() => parseMap("'unclosed:x")).toThrow(/unclosed/);
  });

  it('reads a map option in prefix form (config.yaml nesting flattened), keeping declared sub-options apart', () => {
    const registry = new OptionsRegistry([...Object.values(coreOptions), ...Object.values(httpOptions)]);
    const raw = new Map<string, RawEntry>([
      ['user.artifacts.http-headers.Authorization', { value: 'Bearer abc', source: 'config.yaml' }],
      ['user.artifacts.http-headers.X-Api-Key', { value: 'k', source: 'config.yaml' }],
      ['gateway.artifacts.http-headers.hosts', { value: 'repo.example.com', source: 'config.yaml' }],
      ['gateway.cluster.request-timeout', { value: 'PT45S', source: 'config.yaml' }],
    ]);
    const config = registry.resolve(raw);
    expect(config.get(httpOptions.headers)).toEqual({ Authorization: 'Bearer abc', 'X-Api-Key': 'k' });
    expect(config.get(httpOptions.headersHosts)).toEqual(['repo.example.com']);
    expect(config.get(coreOptions.clusterRequestTimeout)).toBe(45_000);
  });
});
