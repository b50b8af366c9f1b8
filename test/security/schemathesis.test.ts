import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { filePlugin } from '../../fs-plugins/file';
import { projectRoot } from '../../src/project-root';
import { flinkUrl, startGateway, type TestGateway } from '../helpers/gateway';
import { runProcess } from '../helpers/run-process';

const ROOT = projectRoot(__dirname);
const ST = join(ROOT, '.tmp', 'venv', 'bin', 'st');
const REPORTS = join(ROOT, '.tmp', 'schemathesis');

/**
 * schemathesis (PyPI, pinned in test/servers/requirements.txt) against openapi.yaml and a live
 * gateway in front of the real embedded Flink: the operations openapi.yaml documents (the routes
 * the gateway owns), bounded in examples and time, with two checks: no 5xx
 * (`not_a_server_error`) and every response conforming to its documented schema
 * (`response_schema_conformance`).
 *
 * Remote jars are on, but the only filesystem plugin is the (disabled) file plugin: generated
 * URIs are refused by the gateway's own checks, so the run sends nothing beyond loopback.
 */
/**
 * openapi.yaml as schemathesis can read it. Its ErrorResponse says "the gateway's message first" with a
 * one-element `prefixItems` (JSON Schema 2020-12, checked as written by test/unit/openapi); this
 * schemathesis turns `prefixItems` into a draft-4 tuple and then refuses its own result as an invalid
 * 3.1 schema. Here alone, such a tuple becomes `contains` (one of the strings matches): the responses
 * are still checked, only not the position.
 */
function withoutTuples(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutTuples);
  if (node === null || typeof node !== 'object') return node;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(node)) out[k] = withoutTuples(v);
  const tuple = out.prefixItems;
  if (Array.isArray(tuple)) {
    if (tuple.length !== 1) throw new Error('withoutTuples handles one-element prefixItems only');
    delete out.prefixItems;
    out.contains = tuple[0];
  }
  return out;
}

describe('schemathesis against openapi.yaml and the live gateway', () => {
  let gw: TestGateway;

  beforeAll(async () => {
    if (!existsSync(ST)) {
      throw new Error(
        `schemathesis is not installed: ${ST} is missing. Run \`python3 -m venv .tmp/venv && .tmp/venv/bin/pip install -r test/servers/requirements.txt\` (npm test does this first: scripts/test-setup.sh).`,
      );
    }
    gw = await startGateway(flinkUrl(), { 'web.submit.jar-uri.enable': 'true', 'gateway.log.level': 'warn' }, [filePlugin]);
    rmSync(REPORTS, { recursive: true, force: true });
    mkdirSync(REPORTS, { recursive: true });
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
  });

  it('0 responses with a 5xx status and 0 responses that violate the schema', async () => {
    const junit = join(REPORTS, 'junit.xml');
    const spec = join(REPORTS, 'openapi.yaml');
    writeFileSync(spec, stringify(withoutTuples(parse(readFileSync(join(ROOT, 'openapi.yaml'), 'utf8')))));
    const args = [
      'run',
      spec,
      '--url',
      gw.url,
      '--checks',
      'not_a_server_error,response_schema_conformance',
      '--phases',
      'examples,coverage,fuzzing',
      '--max-examples',
      '15',
      '--max-time',
      '150',
      '--workers',
      '1',
      '--seed',
      '20261129',
      '--request-timeout',
      '30',
      '--generation-database',
      'none',
      '--continue-on-failure',
      '--no-color',
      '--report',
      'junit',
      '--report-junit-path',
      junit,
    ];
    // The hooks module (a serializer for the upload's application/java-archive part) sits next to this file.
    const env = {
      ...process.env,
      SCHEMATHESIS_TELEMETRY: 'false',
      NO_COLOR: '1',
      SCHEMATHESIS_HOOKS: 'schemathesis_hooks',
      PYTHONPATH: __dirname,
    };
    const r = await runProcess(ST, args, { env, timeoutMs: 240_000, cwd: ROOT });
    const output = `${r.stdout}\n${r.stderr}`;
    writeFileSync(join(REPORTS, 'output.txt'), output);
    const xml = existsSync(junit) ? readFileSync(junit, 'utf8') : '';
    const attr = (name: string) => Number(new RegExp(`<testsuite[^>]*\\b${name}="(\\d+)"`).exec(xml)?.[1] ?? NaN);
    const operations = attr('tests');
    const failures = attr('failures');
    const errors = attr('errors');
    const requests = /(\d+) (?:test cases|cases) generated|Test cases:\s*(\d+)/.exec(output);
    process.stderr.write(
      `\nschemathesis summary: ${operations} operations, ${failures} with failures, ${errors} with errors` +
        `${requests ? `, ${requests[1] ?? requests[2]} test cases` : ''} (reports in ${REPORTS})\n`,
    );
    if (r.status !== 0) process.stderr.write(`${output.slice(-6_000)}\n(whole output: ${join(REPORTS, 'output.txt')})\n`);
    expect({ exit: r.status, failures, errors }).toEqual({ exit: 0, failures: 0, errors: 0 });
    expect(operations).toBeGreaterThanOrEqual(10);
  }, 300_000);
});
