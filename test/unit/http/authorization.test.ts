import { createRegistry } from '../../../src/composition';
import { actionsOf, isJobGraphSubmission, Permissions, permissionListsOf } from '../../../src/http/authorization';

const actions = (method: string, path: string) => [...actionsOf(method, path)].sort().join('+');

describe('what a request needs', () => {
  it.each([
    ['GET', '/v1/jobs/overview', 'read'],
    ['GET', '/', 'read'],
    ['GET', '/web/index.html', 'read'],
    ['GET', '/jars', 'read'],
    ['GET', '/gateway/v1/fetches', 'read'],
    ['GET', '/v1/jars/x.jar/plan', 'submit'],
    ['POST', '/v1/jars/x.jar/plan', 'submit'],
    ['POST', '/v1/jars/upload', 'submit'],
    ['POST', '/jars/fetch', 'submit'],
    ['POST', '/v1/jars/x.jar/run', 'submit'],
    ['DELETE', '/v1/jars/x.jar', 'submit'],
    ['POST', '/v1/jobs', 'submit'],
    ['POST', '/v1/%6Aobs', 'submit'],
    ['POST', '//v1//jobs/', 'submit'],
    ['PATCH', '/v1/jobs/abc', 'cancel'],
    ['PATCH', '/v1/jobs/abc?mode=cancel', 'cancel'],
    ['GET', '/jobs/abc/yarn-cancel', 'cancel'],
    ['GET', '/jobs/abc/yarn-stop/', 'cancel'],
    ['POST', '/v1/jobs/abc/stop', 'cancel'],
    ['POST', '/v1/jobs/abc/savepoints', 'cancel'],
    ['PUT', '/v1/jobs/abc/resource-requirements', 'cancel'],
    ['DELETE', '/v1/cluster', 'cancel'],
    // Double-encoded: Flink's Router decodes each segment again, so this is a run for Flink too.
    ['POST', '/v1/%256Aars/x.jar/run', 'submit'],
    ['GET', '/jobs/abc/yarn%252Dcancel', 'cancel'],
    ['POST', '/v1/%256Aobs', 'submit'],
    ['GET', '/jobs/abc/yarn%2Dcancel', 'cancel'],
    // What the JobManager cannot filter needs gateway.auth.permission.logs on top; configuration listings are read (filtered).
    ['GET', '/v1/jobmanager/config', 'read'],
    ['GET', '/jobs/abc/jobmanager/config', 'read'],
    ['GET', '/v1/jobmanager/log', 'logs+read'],
    ['GET', '/jobmanager/logs/flink.log', 'logs+read'],
    ['GET', '/v1/jobmanager/%73tdout', 'logs+read'],
    ['GET', '/v1/taskmanagers/tm-1/thread-dump', 'logs+read'],
    ['GET', '/v1/jobs/abc/vertices/def/flamegraph', 'logs+read'],
    ['POST', '/v1/jobmanager/profiler', 'cancel+logs'],
    ['POST', '/v1/taskmanagers/tm-1/%2570rofiler', 'cancel+logs'],
  ])('%s %s → %s', (method, path, expected) => {
    expect(actions(method, path.split('?')[0]!)).toBe(expected);
  });

  it('recognises POST /v1/jobs in every spelling, and nothing else', () => {
    for (const p of ['/v1/jobs', '/jobs', '/jobs/', '/v1/jobs%2F', '/v1/%256Aobs']) expect(isJobGraphSubmission('POST', p)).toBe(true);
    for (const [m, p] of [
      ['GET', '/v1/jobs'],
      ['POST', '/v1/jobs/abc/stop'],
      ['POST', '/v1/jars/upload'],
    ] as const)
      expect(isJobGraphSubmission(m, p)).toBe(false);
  });
});

describe('Permissions', () => {
  const p = new Permissions({ read: ['*'], submit: ['token:ci', 'cert:flink-operator'], cancel: ['cert:flink-operator'] });

  it('grants by exact principal or *', () => {
    expect(p.allows('token:viewer', 'read')).toBe('*');
    expect(p.allows('token:ci', 'submit')).toBe('token:ci');
    expect(p.allows('token:viewer', 'submit')).toBeUndefined();
    expect(p.allows('token:ci', 'cancel')).toBeUndefined();
    expect(p.allows('cert:flink-operator', 'cancel')).toBe('cert:flink-operator');
    expect(p.restricted).toBe(true);
    expect(new Permissions({ read: ['*'], submit: ['*'], cancel: ['*'], logs: ['*'] }).restricted).toBe(false);
  });

  it('gives logs to nobody unless listed', () => {
    expect(p.allows('token:viewer', 'logs')).toBeUndefined();
    expect(p.allows('cert:flink-operator', 'logs')).toBeUndefined();
    const withLogs = new Permissions({ read: ['*'], submit: ['*'], cancel: ['*'], logs: ['token:ops'] });
    expect(withLogs.allows('token:ops', 'logs')).toBe('token:ops');
    expect(withLogs.allows('token:viewer', 'logs')).toBeUndefined();
  });

  it('opens logs without authentication (every caller is anonymous, as for every other list) and keeps its list with it', () => {
    const registry = createRegistry();
    expect(permissionListsOf(registry.resolve(new Map())).logs).toEqual(['*']);
    const raw = new Map([
      ['gateway.auth.tokens-file', { value: '/dev/null', source: '-D' }],
      ['gateway.auth.permission.logs', { value: 'token:ops', source: '-D' }],
    ]);
    expect(permissionListsOf(registry.resolve(raw, new Map(), { files: false })).logs).toEqual(['token:ops']);
    expect(
      permissionListsOf(
        registry.resolve(new Map([raw.get('gateway.auth.tokens-file')!].map((e) => ['gateway.auth.tokens-file', e])), new Map(), {
          files: false,
        }),
      ).logs,
    ).toEqual([]);
    expect(() => registry.resolve(new Map([['gateway.auth.permission.logs', { value: 'token:ops', source: '-D' }]]))).toThrow(
      /gateway\.auth\.permission\.logs \(from -D\): names principals, but no authentication is configured/,
    );
  });

  it("refuses entries that are not principals (the option's check, at resolve time)", () => {
    const raw = new Map([['gateway.auth.permission.submit', { value: 'ci;token:ok', source: '-D' }]]);
    expect(() => createRegistry().resolve(raw)).toThrow(/gateway\.auth\.permission\.submit \(from -D\): 'ci' is not a principal/);
  });
});
