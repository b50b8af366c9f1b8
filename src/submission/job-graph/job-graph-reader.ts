import { type JavaObject, JavaStreamError, type JavaStreamLimits, type JavaValue, readFirstObject } from './java-object-stream';

/** What the gateway needs of a job graph: whose job it is and the job's own configuration. */
export interface JobGraphSummary {
  /** Lower-case 32-hex, as Flink prints a JobID. */
  jobId: string;
  /** Flink 2.3: the application the job belongs to (JobGraph.applicationId), when set. */
  applicationId?: string;
  /** `jobConfiguration` as Flink's `ConfigurationUtils.convertToString` would print each value. */
  configuration: Record<string, string>;
  /** Keys whose values are of a type the gateway does not turn into text (left out of `configuration`). */
  skippedKeys: string[];
  /** The serialised class: `JobGraph`, or (Flink 2.x) a `StreamGraph`. */
  graphClass: string;
}

/** The job graph cannot be read; `reason` says what, for the client's 400. */
export class JobGraphUnreadableError extends Error {
  readonly code = 'JOB_GRAPH_UNREADABLE';
}

/**
 * The classes `RestClusterClient` serialises into the `jobGraphFileName` part of POST /v1/jobs
 * (Flink 1.20: JobGraph; 2.x: an ExecutionPlan, JobGraph or StreamGraph), and each one's job id field.
 */
const GRAPH_CLASSES: Readonly<Record<string, string>> = {
  'org.apache.flink.runtime.jobgraph.JobGraph': 'jobID',
  'org.apache.flink.streaming.api.graph.StreamGraph': 'jobId',
};
const JOB_ID_CLASS = 'org.apache.flink.api.common.JobID';
const APPLICATION_ID_CLASS = 'org.apache.flink.api.common.ApplicationID';
const ABSTRACT_ID_CLASS = 'org.apache.flink.util.AbstractID';
const CONFIGURATION_CLASS = 'org.apache.flink.configuration.Configuration';

/**
 * Reads a job graph's id and configuration from its Java serialisation, loading no class. The
 * fields of a serialised class come primitives first, then objects sorted by name; in every Flink
 * 1.20–2.3 JobGraph `jobConfiguration` and `jobID` (with 2.3's `applicationId` and `classpaths`)
 * precede the vertices, user jars, checkpoint settings and job status hooks, which may hold user
 * classes. The read stops once both are read, so none of that is even walked.
 */
export function readJobGraph(bytes: Buffer, limits?: Partial<JavaStreamLimits>): JobGraphSummary {
  let idField: string | undefined;
  const found = new Set<string>();
  let root: JavaValue;
  try {
    root = readFirstObject(bytes, {
      ...(limits ? { limits } : {}),
      visit: (className, field, _value, depth) => {
        if (depth !== 0) return false;
        if (idField === undefined) idField = GRAPH_CLASSES[className];
        if (idField === undefined) throw new JobGraphUnreadableError(`it is a ${className}, not a Flink JobGraph`);
        if (field === idField || field === 'jobConfiguration') found.add(field);
        return found.size === 2;
      },
    });
  } catch (err) {
    if (err instanceof JavaStreamError || err instanceof JobGraphUnreadableError) throw new JobGraphUnreadableError(err.message);
    throw err;
  }
  if (!isObject(root)) throw new JobGraphUnreadableError(`its first value is ${describe(root)}, not a Flink JobGraph`);
  const graphField = GRAPH_CLASSES[root.className];
  if (!graphField) throw new JobGraphUnreadableError(`it is a ${root.className}, not a Flink JobGraph`);
  const { configuration, skippedKeys } = configurationOf(fieldOf(root, 'jobConfiguration'));
  const jobId = idOf(fieldOf(root, graphField), JOB_ID_CLASS, graphField);
  if (jobId === undefined) throw new JobGraphUnreadableError(`its ${graphField} is not set`);
  const app = fieldOf(root, 'applicationId');
  const applicationId = app === null || app === undefined ? undefined : idOf(app, APPLICATION_ID_CLASS, 'applicationId');
  return { jobId, ...(applicationId ? { applicationId } : {}), configuration, skippedKeys, graphClass: root.className };
}

function isObject(v: JavaValue | undefined): v is JavaObject {
  return v !== null && v !== undefined && typeof v === 'object' && v.kind === 'object';
}

function describe(v: JavaValue | undefined): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v !== 'object') return `a ${typeof v}`;
  return 'className' in v ? `a ${v.className}` : `a ${v.kind}`;
}

/** A field of the object, the most derived class's first. */
function fieldOf(obj: JavaObject, name: string): JavaValue | undefined {
  for (let i = obj.classes.length - 1; i >= 0; i--) {
    const data = obj.classes[i]!;
    if (data.values.has(name)) return data.values.get(name);
  }
  return undefined;
}

/** An AbstractID subclass as Flink prints it: `lowerPart` then `upperPart`, 16 hex digits each. */
function idOf(v: JavaValue | undefined, expected: string, field: string): string | undefined {
  if (v === null || v === undefined) return undefined;
  if (!isObject(v) || v.className !== expected) throw new JobGraphUnreadableError(`its ${field} is ${describe(v)}, not a ${expected}`);
  const id = v.classes.find((c) => c.className === ABSTRACT_ID_CLASS);
  const lower = id?.values.get('lowerPart');
  const upper = id?.values.get('upperPart');
  if (typeof lower !== 'bigint' || typeof upper !== 'bigint') throw new JobGraphUnreadableError(`its ${field} has no lowerPart/upperPart`);
  return hex64(lower) + hex64(upper);
}

function hex64(v: bigint): string {
  return BigInt.asUintN(64, v).toString(16).padStart(16, '0');
}

function configurationOf(v: JavaValue | undefined): { configuration: Record<string, string>; skippedKeys: string[] } {
  if (v === null || v === undefined) return { configuration: {}, skippedKeys: [] };
  if (!isObject(v) || v.className !== CONFIGURATION_CLASS)
    throw new JobGraphUnreadableError(`its jobConfiguration is ${describe(v)}, not a ${CONFIGURATION_CLASS}`);
  const map = fieldOf(v, 'confData');
  if (!isObject(map) || map.className !== 'java.util.HashMap')
    throw new JobGraphUnreadableError(`its jobConfiguration's confData is ${describe(map)}, not a java.util.HashMap`);
  // HashMap.writeObject: defaultWriteObject, then (block data) capacity and size, then key, value, ...
  const data = map.classes.find((c) => c.className === 'java.util.HashMap');
  const [head, ...entries] = data?.annotations ?? [];
  if (!head || typeof head !== 'object' || head.kind !== 'block' || head.bytes.length < 8)
    throw new JobGraphUnreadableError("its jobConfiguration's HashMap has no size");
  const size = head.bytes.readInt32BE(4);
  if (size < 0 || entries.length !== size * 2)
    throw new JobGraphUnreadableError(`its jobConfiguration's HashMap holds ${entries.length} values for ${size} entries`);
  const configuration: Record<string, string> = {};
  const skippedKeys: string[] = [];
  for (let i = 0; i < entries.length; i += 2) {
    const key = entries[i];
    if (typeof key !== 'string') throw new JobGraphUnreadableError(`its jobConfiguration has a key that is ${describe(key)}, not a string`);
    const text = valueText(entries[i + 1], 0);
    if (text === undefined) skippedKeys.push(key);
    else configuration[key] = text;
  }
  return { configuration, skippedKeys };
}

const BOXED: ReadonlySet<string> = new Set([
  'java.lang.Integer',
  'java.lang.Long',
  'java.lang.Boolean',
  'java.lang.Float',
  'java.lang.Double',
  'java.lang.Short',
  'java.lang.Byte',
]);

/**
 * A configuration value as text, as Flink's `ConfigurationUtils.convertToString` writes it: strings
 * as they are, boxed numbers and booleans, enum constants by name, `Duration` and `MemorySize` in
 * units Flink parses back, lists joined by `;`, maps as `k:v,k:v`. Anything else is undefined (the
 * key is left out, never guessed).
 */
function valueText(v: JavaValue | undefined, depth: number): string | undefined {
  if (typeof v === 'string') return v;
  if (v === null || v === undefined || typeof v !== 'object' || depth > 2) return undefined;
  if (v.kind === 'enum') return v.constant;
  if (v.kind !== 'object') return undefined;
  if (BOXED.has(v.className)) {
    const value = fieldOf(v, 'value');
    if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return floatText(v.className, value);
    return undefined;
  }
  if (v.className === 'java.time.Ser') return durationText(v);
  if (v.className === 'org.apache.flink.configuration.MemorySize') {
    const bytes = fieldOf(v, 'bytes');
    return typeof bytes === 'bigint' ? `${bytes} bytes` : undefined;
  }
  if (
    v.className === 'java.util.ArrayList' ||
    v.className === 'java.util.Arrays$ArrayList' ||
    v.className.startsWith('java.util.ImmutableCollections$List')
  ) {
    const items = listItems(v);
    const texts = items?.map((item) => valueText(item, depth + 1));
    return texts?.every((t) => t !== undefined) ? texts.join(';') : undefined;
  }
  return undefined;
}

function floatText(className: string, value: number | bigint | boolean): string {
  // Java prints 1.0 for a whole double; a whole float/double reads back either way.
  if ((className === 'java.lang.Double' || className === 'java.lang.Float') && typeof value === 'number' && Number.isInteger(value))
    return value.toFixed(1);
  return String(value);
}

/** ArrayList: defaultWriteObject (size), then an int block, then the elements. */
function listItems(v: JavaObject): JavaValue[] | undefined {
  if (v.className === 'java.util.Arrays$ArrayList') {
    const a = fieldOf(v, 'a');
    return a && typeof a === 'object' && a.kind === 'array' ? a.elements : undefined;
  }
  const data = v.classes[v.classes.length - 1];
  return data?.annotations.filter((x) => !(x !== null && typeof x === 'object' && x.kind === 'block'));
}

/** java.time.Duration's serial form (java.time.Ser, type 1): seconds (long), nanos (int). */
function durationText(v: JavaObject): string | undefined {
  const block = v.classes[v.classes.length - 1]?.annotations[0];
  if (!block || typeof block !== 'object' || block.kind !== 'block' || block.bytes.length < 13 || block.bytes[0] !== 1) return undefined;
  const seconds = block.bytes.readBigInt64BE(1);
  const nanos = block.bytes.readInt32BE(9);
  const total = seconds * 1_000_000_000n + BigInt(nanos);
  if (total % 1_000_000n === 0n) return `${total / 1_000_000n} ms`;
  return `${total} ns`;
}
