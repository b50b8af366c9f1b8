import { compileErrors, validate } from '@readme/openapi-parser';
import type { OpenAPIV3_1 } from 'openapi-types';
import { classify, type JarRouteName } from '../../../src/http/canonical-path';
import { ERROR_CODES, type ErrorCode } from '../../../src/errors/codes';
import { compileSchema, createAjv, HTTP_METHODS, loadSpec, matchSpecPath, schemaValidator, type Operation } from '../../helpers/openapi';

/** Every jar route the gateway owns (canonical-path.ts) and where openapi.yaml must describe it. */
const JAR_ROUTES: Record<JarRouteName, { methods: string[]; path: string }> = {
  list: { methods: ['get'], path: '/jars' },
  upload: { methods: ['post'], path: '/jars/upload' },
  fetch: { methods: ['post'], path: '/jars/fetch' },
  delete: { methods: ['delete'], path: '/jars/{jarid}' },
  plan: { methods: ['get', 'post'], path: '/jars/{jarid}/plan' },
  run: { methods: ['post'], path: '/jars/{jarid}/run' },
  'run-application': { methods: ['post'], path: '/jars/{jarid}/run-application' },
};
const SAMPLE_JAR_ID = '5f4c3d2e-1a2b-4c5d-8e9f-0a1b2c3d4e5f_WordCount.jar';
const GATEWAY_PREFIX = '/gateway/v1/';
/** 4xx/5xx responses that are deliberately not Flink error envelopes. */
const NON_ERROR_ENVELOPE = new Set(['GET /gateway/v1/ready 503']);

const spec = loadSpec();
const codes = Object.keys(ERROR_CODES) as ErrorCode[];

/** Schema Objects outside components.schemas, found under any `schema` key. */
function schemaObjects(node: unknown, where = '#'): { where: string; schema: Record<string, unknown> }[] {
  if (node === null || typeof node !== 'object') return [];
  const out: { where: string; schema: Record<string, unknown> }[] = [];
  for (const [k, v] of Object.entries(node)) {
    if (where === '#/components' && k === 'schemas') continue;
    if (k === 'schema' && v !== null && typeof v === 'object') out.push({ where: `${where}/schema`, schema: v as Record<string, unknown> });
    else out.push(...schemaObjects(v, `${where}/${k}`));
  }
  return out;
}

function operations(): { method: string; path: string; op: Operation }[] {
  const out: { method: string; path: string; op: Operation }[] = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of HTTP_METHODS) if (item[method]) out.push({ method, path, op: item[method] as Operation });
  }
  return out;
}

describe('openapi.yaml', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    expect(spec.openapi).toMatch(/^3\.1\./);
    const result = await validate(structuredClone(spec) as unknown as OpenAPIV3_1.Document);
    if (!result.valid) throw new Error(compileErrors(result));
    expect(result.warnings).toEqual([]);
  });

  it('has schemas that all compile as strict JSON Schema 2020-12', () => {
    // The OpenAPI meta-schema barely checks Schema Objects (a `type: strin` passes); ajv does.
    for (const name of Object.keys(spec.components.schemas)) {
      expect(() => schemaValidator(name)).not.toThrow();
    }
    // And every Schema Object elsewhere: parameters, request bodies, responses, multipart parts.
    for (const { where, schema } of schemaObjects(spec)) {
      expect(() => compileSchema(where, schema)).not.toThrow();
    }
    expect(() => createAjv().compile({ type: 'strin' })).toThrow();
    expect(() => createAjv().compile({ type: 'string', minLenght: 1 })).toThrow(/unknown keyword/);
  });

  it('describes every jar route at both /v1 and the bare path, and nothing the gateway does not own', () => {
    for (const [route, { methods, path }] of Object.entries(JAR_ROUTES)) {
      for (const prefix of ['/v1', '']) {
        const item = spec.paths[prefix + path];
        expect({ path: prefix + path, present: item !== undefined }).toEqual({ path: prefix + path, present: true });
        const concrete = (prefix + path).replace('{jarid}', SAMPLE_JAR_ID);
        for (const method of methods) {
          expect({ method, path: prefix + path, has: item?.[method] !== undefined }).toEqual({ method, path: prefix + path, has: true });
          expect(classify(method.toUpperCase(), concrete)).toMatchObject({ kind: 'jar', route, versioned: prefix === '/v1' });
        }
      }
    }
    for (const { method, path } of operations()) {
      if (path.startsWith(GATEWAY_PREFIX)) continue;
      const c = classify(method.toUpperCase(), path.replace('{jarid}', SAMPLE_JAR_ID));
      expect({ method, path, kind: c.kind }).toEqual({ method, path, kind: 'jar' });
    }
  });

  it('keeps the /v1 and bare copies identical except for the operationId', () => {
    for (const [path, item] of Object.entries(spec.paths)) {
      if (!path.startsWith('/v1/')) continue;
      const bare = spec.paths[path.slice(3)];
      expect(bare).toBeDefined();
      for (const method of HTTP_METHODS) {
        const v1 = item[method] as Operation | undefined;
        const b = bare?.[method] as Operation | undefined;
        if (!v1 && !b) continue;
        expect(b?.operationId).toBe(`${v1?.operationId}Unversioned`);
        expect({ ...b, operationId: undefined }).toEqual({ ...v1, operationId: undefined });
      }
      expect(bare?.parameters).toEqual(item.parameters);
    }
  });

  it('gives every operation an operationId, a tag and a summary, and documents the gateway routes', () => {
    for (const { method, path, op } of operations()) {
      expect({ method, path, operationId: typeof op.operationId, tags: op.tags?.length ?? 0, summary: typeof op.summary }).toEqual({
        method,
        path,
        operationId: 'string',
        tags: 1,
        summary: 'string',
      });
    }
    expect(spec.paths['/gateway/v1/health']?.get).toBeDefined();
    expect(spec.paths['/gateway/v1/ready']?.get).toBeDefined();
    expect(spec.paths['/gateway/v1/fetches']?.get).toBeDefined();
    expect(spec.paths['/gateway/v1/fetches/{id}']?.get).toBeDefined();
    expect((spec.paths['/v1/jars/fetch']?.post as Operation | undefined)?.operationId).toBe('fetchJarFromUri');
  });

  it('uses ErrorResponse for every 4xx/5xx, and lists the cluster failures on every jar operation', () => {
    for (const { method, path, op } of operations()) {
      for (const [status, response] of Object.entries(op.responses)) {
        if (!/^[45]/.test(status) || NON_ERROR_ENVELOPE.has(`${method.toUpperCase()} ${path} ${status}`)) continue;
        const ref = response.$ref as string | undefined;
        const resolved = ref ? spec.components.responses[ref.split('/').pop()!] : response;
        const schema = (resolved?.content as Record<string, { schema?: { $ref?: string } }> | undefined)?.['application/json']?.schema;
        expect({ method, path, status, schema: schema?.$ref }).toEqual({
          method,
          path,
          status,
          schema: '#/components/schemas/ErrorResponse',
        });
      }
      if (!path.startsWith(GATEWAY_PREFIX)) {
        expect({ method, path, statuses: ['500', '502', '503', '504'].filter((s) => op.responses[s]) }).toEqual({
          method,
          path,
          statuses: ['500', '502', '503', '504'],
        });
      }
    }
  });

  it('lists, per jar operation, every status the gateway answers that Flink does not', () => {
    // Flink's own statuses on these routes are 200/202, 400 and 500 (and 404 on a cluster without
    // jar handlers); everything else is the gateway's, and must be documented where it can happen.
    const gatewayStatuses: Record<string, string[]> = {
      'get /jars': ['401', '403', '404', '502', '503', '504'],
      'post /jars/upload': ['401', '403', '404', '413', '429', '502', '503', '504'],
      'post /jars/fetch': ['401', '403', '404', '413', '429', '502', '503', '504', '507'],
      'delete /jars/{jarid}': ['401', '403', '404', '502', '503', '504'],
      'get /jars/{jarid}/plan': ['401', '403', '404', '502', '503', '504'],
      'post /jars/{jarid}/plan': ['401', '403', '404', '413', '429', '502', '503', '504', '507'],
      'post /jars/{jarid}/run': ['401', '403', '404', '409', '413', '429', '502', '503', '504', '507'],
      'post /jars/{jarid}/run-application': ['401', '403', '404', '409', '429', '502', '503', '504'],
    };
    for (const [route, statuses] of Object.entries(gatewayStatuses)) {
      const [method, path] = route.split(' ') as [string, string];
      for (const prefix of ['/v1', '']) {
        const op = spec.paths[prefix + path]?.[method as 'get'] as Operation;
        expect({ route: `${method} ${prefix}${path}`, missing: statuses.filter((st) => !op.responses[st]) }).toEqual({
          route: `${method} ${prefix}${path}`,
          missing: [],
        });
      }
    }
    const home = spec.paths['/gateway/v1/jars/fetch']?.post as Operation;
    expect(Object.keys(home.responses).sort()).toEqual(Object.keys((spec.paths['/v1/jars/fetch']!.post as Operation).responses).sort());
    expect((spec.paths['/v1/jars/fetch']!.post as Operation & { deprecated?: boolean }).deprecated).toBe(true);
    expect((spec.paths['/v1/jars/fetch']!.post as Operation).description).toMatch(/Deprecation: @1796515200/);
  });

  it("describes ErrorResponse as Flink's envelope: exactly one property, errors, of GW_-prefixed strings", () => {
    const validate = schemaValidator('ErrorResponse');
    expect(validate({ errors: ['GW_JAR_NOT_FOUND: File x.jar does not exist on the JobManager.'] })).toBe(true);
    expect(validate({ errors: ['GW_JAR_NOT_FOUND: x'], code: 'GW_JAR_NOT_FOUND' })).toBe(false);
    expect(validate({ errors: ['File x.jar does not exist'] })).toBe(false);
    expect(validate({ errors: [] })).toBe(false);
    // The JobManager's own text may follow the gateway's message, verbatim; the gateway's comes first.
    expect(
      validate({
        errors: ['GW_RUN_JOB_ID_CONFLICT: x', 'org.apache.flink.runtime.rest.handler.RestHandlerException: Could not execute application.'],
      }),
    ).toBe(true);
    expect(validate({ errors: ['Could not execute application.', 'GW_RUN_JOB_ID_CONFLICT: x'] })).toBe(false);
    expect(validate({})).toBe(false);
    const schema = spec.components.schemas.ErrorResponse as { additionalProperties?: unknown; required?: string[]; properties?: object };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(['errors']);
    expect(Object.keys(schema.properties ?? {})).toEqual(['errors']);
  });

  it('lists every error code of the registry, with its status, and no other', () => {
    const text = JSON.stringify(spec);
    for (const code of codes) expect({ code, mentioned: new RegExp(`\\b${code}\\b`).test(text) }).toEqual({ code, mentioned: true });
    expect((spec.components.schemas.ErrorCode as { enum: string[] }).enum.slice().sort()).toEqual(codes.slice().sort());
    // The status table in ErrorResponse's description.
    const table = String(spec.components.schemas.ErrorResponse?.description);
    const rows = new Map([...table.matchAll(/^\| `(GW_[A-Z0-9_]+)` \| (\d{3}) \|/gm)].map((m) => [m[1]!, Number(m[2])]));
    expect(Object.fromEntries(rows)).toEqual(Object.fromEntries(codes.map((c) => [c, ERROR_CODES[c].status])));
    // Codes never mentioned anywhere they do not belong.
    const unknown = [...new Set(text.match(/\bGW_[A-Z0-9_]+\b/g) ?? [])].filter((c) => !(c in ERROR_CODES));
    expect(unknown).toEqual([]);
  });

  it("only documents a code under a response whose status is that code's status", () => {
    // Which statuses each components.responses entry is used under.
    const usedAs = new Map<string, Set<string>>();
    for (const { op } of operations()) {
      for (const [status, response] of Object.entries(op.responses)) {
        const name = typeof response.$ref === 'string' ? response.$ref.split('/').pop()! : undefined;
        if (name) usedAs.set(name, (usedAs.get(name) ?? new Set()).add(status));
      }
    }
    for (const [name, response] of Object.entries(spec.components.responses)) {
      const mentioned = [...new Set(String(response.description).match(/\bGW_[A-Z0-9_]+\b/g) ?? [])] as ErrorCode[];
      const statuses = [...(usedAs.get(name) ?? [])];
      for (const code of mentioned) {
        // NotFound is deliberately referenced by no operation (it answers unknown /jars paths).
        const expected = name === 'NotFound' ? ['404'] : statuses;
        expect({ response: name, code, statuses: expected }).toEqual({
          response: name,
          code,
          statuses: [String(ERROR_CODES[code].status)],
        });
      }
    }
  });

  it('documents the run request fields clients send, including user.artifacts.job-jar', () => {
    const run = spec.components.schemas.JarRunRequestBody as { properties: Record<string, { deprecated?: boolean }> };
    expect(Object.keys(run.properties).sort()).toEqual(
      [
        'allowNonRestoredState',
        'claimMode',
        'entryClass',
        'flinkConfiguration',
        'jobId',
        'parallelism',
        'programArgs',
        'programArgsList',
        'restoreMode',
        'savepointPath',
      ].sort(),
    );
    expect(run.properties.restoreMode?.deprecated).toBe(true);
    const body = schemaValidator('JarRunRequestBody');
    const operator = {
      entryClass: 'com.example.Main',
      programArgsList: [],
      parallelism: 4,
      jobId: '3f0c7c9a8f2e4d1b9a6e5c4b3a2f1e0d',
      allowNonRestoredState: true,
      savepointPath: 's3://b/sp',
      claimMode: 'NO_CLAIM',
      flinkConfiguration: { 'parallelism.default': '4' },
    };
    expect(body(operator)).toBe(true);
    expect(body({ parallelism: '2', allowNonRestoredState: 'false', programArgs: '', savepointPath: '' })).toBe(true); // the Web UI
    expect(body({ jobId: 'not-hex' })).toBe(false);
    expect(body({ parallelism: 'four' })).toBe(false);
    expect(body({ claimMode: 'SOMETIMES' })).toBe(false);
    expect(body({ flinkConfiguration: { a: { nested: true } } })).toBe(false);
    const fc = spec.components.schemas.FlinkConfiguration as { properties: Record<string, unknown>; description: string };
    expect(fc.properties['user.artifacts.job-jar']).toBeDefined();
    expect(fc.description).toMatch(/web\.submit\.jar-uri\.enable/);
    expect(schemaValidator('JarRunResponseBody')({ jobid: '3f0c7c9a8f2e4d1b9a6e5c4b3a2f1e0d' })).toBe(true);
    expect(schemaValidator('JarRunResponseBody')({ jobId: '3f0c7c9a8f2e4d1b9a6e5c4b3a2f1e0d' })).toBe(false);
  });

  it('documents remote jars on run and plan: the URI, its SHA-256 pin, the provenance keys and the fetch errors', () => {
    const fc = spec.components.schemas.FlinkConfiguration as { properties: Record<string, unknown>; description: string };
    expect(fc.properties['gateway.artifacts.job-jar.sha256']).toBeDefined();
    for (const key of ['gateway.artifact.uri', 'gateway.artifact.sha256', 'gateway.artifact.version', 'GW_FETCH_DIGEST_MISMATCH']) {
      expect(fc.description).toContain(key);
    }
    const run = schemaValidator('JarRunRequestBody');
    const plan = schemaValidator('JarPlanRequestBody');
    const remote = {
      flinkConfiguration: { 'user.artifacts.job-jar': 's3://b/app.jar', 'gateway.artifacts.job-jar.sha256': 'ab'.repeat(32) },
    };
    expect(run(remote)).toBe(true);
    expect(plan(remote)).toBe(true);
    expect(run({ flinkConfiguration: { 'gateway.artifacts.job-jar.sha256': 'abc' } })).toBe(false);
    // Every GW_FETCH_* code a URI can cause is listed on run, plan and fetch, under its status.
    const fetchCodes = codes.filter((c) => c.startsWith('GW_FETCH_'));
    for (const path of ['/v1/jars/{jarid}/run', '/v1/jars/{jarid}/plan', '/v1/jars/fetch']) {
      const op = spec.paths[path]?.post as Operation;
      for (const code of fetchCodes) {
        const response = op.responses[String(ERROR_CODES[code].status)];
        const name = String(response?.$ref ?? '')
          .split('/')
          .pop()!;
        expect({ path, code, listed: String(spec.components.responses[name]?.description).includes(code) }).toEqual({
          path,
          code,
          listed: true,
        });
      }
    }
    // GET plan takes no body, so it cannot name a URI.
    const getPlan = JSON.stringify((spec.paths['/v1/jars/{jarid}/plan']!.get as Operation).responses);
    const described = [...getPlan.matchAll(/responses\/(\w+)/g)]
      .map((m) => String(spec.components.responses[m[1]!]?.description))
      .join(' ');
    expect(described).not.toMatch(/GW_FETCH_|GW_JAR_URI_/);
    // GW_FETCH_BUSY's 503 announces Retry-After.
    const busy = String((spec.paths['/v1/jars/fetch']!.post as Operation).responses['503']?.$ref)
      .split('/')
      .pop()!;
    expect((spec.components.responses[busy] as { headers?: Record<string, unknown> }).headers?.['Retry-After']).toBeDefined();
  });

  it('documents POST /jars/fetch and the fetch progress routes', () => {
    const body = schemaValidator('JarFetchRequestBody');
    expect(body({ uri: 's3://bucket/app.jar' })).toBe(true);
    expect(body({ uri: 'https://h/app.jar', sha256: 'AB'.repeat(32) })).toBe(true);
    expect(body({ uri: 's3://bucket/app.jar', sha256: null })).toBe(true);
    expect(body({})).toBe(false);
    expect(body({ uri: '' })).toBe(false);
    expect(body({ uri: 's3://bucket/app.jar', sha256: 'abc' })).toBe(false);
    const fetch = spec.paths['/jars/fetch']?.post as Operation;
    expect(fetch.operationId).toBe('fetchJarFromUriUnversioned');
    expect(fetch.responses['200']?.$ref).toBe('#/components/responses/JarFetchOk');
    expect(spec.components.responses.JarFetchOk?.content).toEqual(spec.components.responses.JarUploadOk?.content);
    expect(String(spec.components.responses.JarFetchBadRequest?.description)).toMatch(
      /GW_JAR_URI_DISABLED[\s\S]*web\.submit\.jar-uri\.enable/,
    );

    const record = schemaValidator('FetchRecord');
    const running = {
      id: '0b6f3c1e-3a2d-4b5c-9d8e-7f6a5b4c3d2e',
      uri: 's3://bucket/app.jar',
      phase: 'downloading',
      bytes: 1024,
      total: 4096,
      startedAt: '2025-01-01T00:00:00.000Z',
    };
    const done = { ...running, phase: 'done', bytes: 4096, finishedAt: '2025-01-01T00:00:01.000Z', sha256: 'ab'.repeat(32) };
    const failed = {
      ...running,
      phase: 'failed',
      finishedAt: '2025-01-01T00:00:01.000Z',
      error: 's3://bucket/app.jar does not exist (404); check the bucket/container and the path.',
    };
    for (const r of [running, done, failed]) expect(record(r)).toBe(true);
    expect(record({ ...running, phase: 'paused' })).toBe(false);
    expect(record({ ...running, id: 'x' })).toBe(false);
    expect(record({ ...running, extra: 1 })).toBe(false);
    expect((spec.components.schemas.FetchPhase as { enum: string[] }).enum).toEqual([
      'queued',
      'checking',
      'downloading',
      'verifying',
      'done',
      'cached',
      'failed',
    ]);
    expect(schemaValidator('FetchList')({ fetches: [running, done] })).toBe(true);
    expect(schemaValidator('FetchList')({})).toBe(false);
    const one = spec.paths['/gateway/v1/fetches/{id}']?.get as Operation;
    expect(Object.keys(one.responses).sort()).toEqual(['200', '401', '403', '404']);
  });

  it('explains the pass-through and the error envelope in info.description', () => {
    const d = String(spec.info.description);
    expect(d).toMatch(/passed through/i);
    expect(d).toMatch(/nightlies\.apache\.org\/flink/);
    expect(d).toMatch(/\{"errors": \[/);
  });

  it('resolves concrete paths to their templates', () => {
    expect(matchSpecPath('/v1/jars/upload')).toBe('/v1/jars/upload');
    expect(matchSpecPath('/jars/fetch')).toBe('/jars/fetch');
    expect(matchSpecPath('/gateway/v1/fetches')).toBe('/gateway/v1/fetches');
    expect(matchSpecPath('/gateway/v1/fetches/0b6f3c1e-3a2d-4b5c-9d8e-7f6a5b4c3d2e')).toBe('/gateway/v1/fetches/{id}');
    expect(matchSpecPath(`/jars/${SAMPLE_JAR_ID}/run`)).toBe('/jars/{jarid}/run');
    expect(matchSpecPath(`/v1/jars/${SAMPLE_JAR_ID}`)).toBe('/v1/jars/{jarid}');
    expect(matchSpecPath('/jobs/overview')).toBeUndefined();
  });
});
