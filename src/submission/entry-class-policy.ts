import type { JarEntryPoints } from '../artifacts/jar-entry-points';

/**
 * Packages Flink always loads parent-first (its `classloader.parent-first-patterns.default`, plus the
 * JDK's and this project's token classes): a class under one of them comes from the JobManager's own
 * classpath even when the jar carries a copy, so naming one as the entry class would start Flink's
 * code (e.g. `org.apache.flink.client.cli.CliFrontend`, which calls System.exit), not the jar's.
 */
const PARENT_FIRST = [
  'java.',
  'javax.',
  'jdk.',
  'sun.',
  'com.sun.',
  'scala.',
  'org.apache.flink.',
  'com.esotericsoftware.kryo',
  'org.apache.hadoop.',
  'org.xml',
  'org.apache.xerces',
  'org.w3c',
  'org.rocksdb.',
  'org.slf4j',
  'org.apache.log4j',
  'org.apache.logging',
  'org.apache.commons.logging',
  'ch.qos.logback',
  'dev.flinkjargateway.',
];

/**
 * Flink's own example programs (its `examples/` jars): under org.apache.flink. but never on a
 * JobManager's classpath, so such a class is the jar's own.
 */
const FLINK_EXAMPLES = ['org.apache.flink.examples.', 'org.apache.flink.streaming.examples.', 'org.apache.flink.table.examples.'];

/**
 * In `fetched-only` mode the class a run starts must be one of the fetched jar's own: the request's
 * `entryClass`, else the manifest's `program-class` / `Main-Class`. Returns why not, or undefined.
 */
export function entryClassProblem(entryClass: string | undefined, points: JarEntryPoints): string | undefined {
  const requested = entryClass?.trim() ? entryClass.trim() : undefined;
  if (requested === undefined && points.manifestUnread)
    return "no entryClass was given and the jar's manifest could not be read to find its entry class";
  const cls = requested ?? points.manifestEntryClass;
  if (cls === undefined) return undefined; // Flink refuses a jar that names no entry class
  const shown = `'${cls.slice(0, 200)}'${requested === undefined ? " (the manifest's entry class)" : ''}`;
  const pkg = FLINK_EXAMPLES.some((p) => cls.startsWith(p)) ? undefined : PARENT_FIRST.find((p) => cls.startsWith(p));
  if (pkg !== undefined) return `${shown} is under ${pkg.replace(/\.$/, '')}, which Flink loads from its own classpath, not from the jar`;
  if (!points.classes.has(cls)) return `${shown} is not a class of the fetched jar`;
  return undefined;
}
