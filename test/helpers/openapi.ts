import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Ajv2020, { type ErrorObject, type ValidateFunction } from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';
import { projectRoot } from '../../src/project-root';

/**
 * Reads `openapi.yaml` and checks real bodies against its schemas with ajv (JSON Schema 2020-12,
 * the dialect of OpenAPI 3.1). Component schemas are registered once under `SPEC_ID#/$defs/<name>`
 * so that `$ref`s between them resolve. ajv runs in strict mode, so a typo in a schema keyword fails
 * loudly instead of silently accepting everything; union types are allowed because OpenAPI 3.1
 * writes nullable as `type: [string, 'null']`.
 */

export const OPENAPI_FILE = join(projectRoot(__dirname), 'openapi.yaml');
const SPEC_ID = 'https://flink-jar-gateway.invalid/openapi.json';
export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

type Json = Record<string, unknown>;

export interface Operation extends Json {
  operationId?: string;
  tags?: string[];
  summary?: string;
  responses: Record<string, Json>;
}

export interface OpenApiDoc extends Json {
  openapi: string;
  info: Json & { description?: string };
  paths: Record<string, Json>;
  components: Json & { schemas: Record<string, Json>; responses: Record<string, Json> };
}

let cachedDoc: OpenApiDoc | undefined;
let cachedAjv: Ajv2020 | undefined;
const validators = new Map<string, ValidateFunction>();

/** The parsed spec (a fresh deep copy each call, so callers may mutate it). */
export function loadSpec(): OpenApiDoc {
  cachedDoc ??= parse(readFileSync(OPENAPI_FILE, 'utf8')) as OpenApiDoc;
  return structuredClone(cachedDoc);
}

/** An ajv for OpenAPI 3.1 schemas: draft 2020-12, strict, formats, OpenAPI's extra annotation keywords. */
export function createAjv(): Ajv2020 {
  // strictTuples off: an open tuple (`prefixItems` then `items`) is how ErrorResponse says "the
  // gateway's message first, then the JobManager's own strings"; every other strict check stays.
  const ajv = new Ajv2020({ strict: true, strictTuples: false, allowUnionTypes: true, allErrors: true, validateFormats: true });
  addFormats(ajv);
  // OpenAPI 3.1's own Schema Object keywords (annotations only).
  ajv.addVocabulary(['example', 'xml', 'externalDocs']);
  return ajv;
}

/** Rewrites `#/components/schemas/X` to the absolute id under which X is registered. */
function absolutise<T>(node: T): T {
  if (Array.isArray(node)) return node.map(absolutise) as T;
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node as Json)) {
    out[k] =
      k === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/')
        ? `${SPEC_ID}#/$defs/${v.slice('#/components/schemas/'.length)}`
        : absolutise(v);
  }
  return out as T;
}

function specAjv(): Ajv2020 {
  if (cachedAjv) return cachedAjv;
  const ajv = createAjv();
  ajv.addSchema({ $id: SPEC_ID, $defs: absolutise(loadSpec().components.schemas) });
  cachedAjv = ajv;
  return ajv;
}

function compile(key: string, schema: Json): ValidateFunction {
  let v = validators.get(key);
  if (!v) {
    v = specAjv().compile(absolutise(schema));
    validators.set(key, v);
  }
  return v;
}

/** Compiles a Schema Object from the spec (its `#/components/schemas/...` refs resolved); throws if invalid. */
export function compileSchema(key: string, schema: Json): ValidateFunction {
  return compile(`inline:${key}`, schema);
}

/** Validator for `#/components/schemas/<name>`. */
export function schemaValidator(name: string): ValidateFunction {
  if (!loadSpec().components.schemas[name]) throw new Error(`openapi.yaml has no schema ${name}`);
  return compile(`schema:${name}`, { $ref: `#/components/schemas/${name}` });
}

function deref(node: Json): Json {
  const ref = node.$ref;
  if (typeof ref !== 'string') return node;
  const m = /^#\/components\/responses\/(.+)$/.exec(ref);
  if (!m) throw new Error(`unsupported response $ref ${ref}`);
  const target = loadSpec().components.responses[m[1]!];
  if (!target) throw new Error(`dangling $ref ${ref}`);
  return target;
}

/** The spec path template (e.g. `/v1/jars/{jarid}/run`) a concrete path matches, if any. */
export function matchSpecPath(concretePath: string): string | undefined {
  const path = concretePath.split('?')[0]!;
  const templates = Object.keys(loadSpec().paths);
  // Literal templates win over parameterised ones (`/jars/upload` vs `/jars/{jarid}`).
  const literal = templates.find((t) => t === path);
  if (literal) return literal;
  return templates.find((t) => new RegExp(`^${t.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^/}]+\}/g, '[^/]+')}$`).test(path));
}

/** The response object the spec declares for an operation and status (`$ref`s followed). */
export function responseSpec(method: string, specPath: string, status: number): Json {
  const op = loadSpec().paths[specPath]?.[method.toLowerCase()] as Operation | undefined;
  if (!op) throw new Error(`openapi.yaml has no operation ${method.toUpperCase()} ${specPath}`);
  const res = op.responses[String(status)] ?? op.responses.default;
  if (!res)
    throw new Error(
      `openapi.yaml declares no ${status} response for ${method.toUpperCase()} ${specPath} (has ${Object.keys(op.responses).join(', ')})`,
    );
  return deref(res);
}

export interface CheckedResponse {
  status: number;
  body: unknown;
  headers?: Record<string, unknown>;
}

function formatErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .map((e) => `${e.instancePath || '(root)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`)
    .join('; ');
}

/**
 * Problems with a real response against the spec's declaration for `method` + `url` (a concrete
 * path; the query is ignored): undeclared status, content type, body schema. Empty when it conforms.
 */
export function responseProblems(method: string, url: string, res: CheckedResponse): string[] {
  const path = new URL(url, 'http://x').pathname;
  const specPath = matchSpecPath(path);
  if (!specPath) return [`no path in openapi.yaml matches ${path}`];
  const declared = responseSpec(method, specPath, res.status);
  const content = declared.content as Record<string, { schema?: Json }> | undefined;
  if (!content) return res.body === undefined || res.body === '' ? [] : [`${res.status} declares no body`];
  const problems: string[] = [];
  const ctype = String(res.headers?.['content-type'] ?? '');
  const mediaType = Object.keys(content).find((m) => ctype.split(';')[0]!.trim().toLowerCase() === m);
  if (res.headers && !mediaType) problems.push(`content-type ${ctype || '(none)'} is not one of ${Object.keys(content).join(', ')}`);
  const schema = content[mediaType ?? Object.keys(content)[0]!]?.schema;
  if (schema) {
    const validate = compile(`response:${method}:${specPath}:${res.status}`, schema);
    if (!validate(res.body))
      problems.push(
        `body does not match the ${res.status} schema of ${method.toUpperCase()} ${specPath}: ${formatErrors(validate.errors)}`,
      );
  }
  return problems;
}

/** Throws with a readable message unless the response conforms to the spec. */
export function assertMatchesSpec(method: string, url: string, res: CheckedResponse): void {
  const problems = responseProblems(method, url, res);
  if (problems.length > 0)
    throw new Error(`${method.toUpperCase()} ${url} → ${res.status} ${JSON.stringify(res.body).slice(0, 500)}\n  ${problems.join('\n  ')}`);
}

/** Throws unless `body` is valid against `#/components/schemas/<name>`. */
export function assertMatchesSchema(name: string, body: unknown): void {
  const validate = schemaValidator(name);
  if (!validate(body)) throw new Error(`${JSON.stringify(body).slice(0, 500)} does not match ${name}: ${formatErrors(validate.errors)}`);
}
