import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runProcess } from './run-process';

/**
 * The placeholder jar the Flink Kubernetes Operator uploads for a FlinkSessionJob without a jarURI,
 * built the way it builds it: a `JarOutputStream` with an empty `Manifest`, nothing else (Java's
 * source launcher runs these lines; no build step).
 */
export async function operatorPlaceholderJar(): Promise<Buffer> {
  const dir = mkdtempSync(join(tmpdir(), 'gw-placeholder-'));
  try {
    const src = join(dir, 'EmptyJar.java');
    writeFileSync(
      src,
      'import java.io.FileOutputStream;\nimport java.util.jar.JarOutputStream;\nimport java.util.jar.Manifest;\n' +
        'public class EmptyJar { public static void main(String[] a) throws Exception {\n' +
        '  try (JarOutputStream out = new JarOutputStream(new FileOutputStream(a[0]), new Manifest())) { }\n} }\n',
    );
    const jar = join(dir, 'empty.jar');
    const r = await runProcess('java', [src, jar], { timeoutMs: 60_000 });
    if (r.status !== 0) throw new Error(`could not build the placeholder jar with java (exit ${r.status}): ${r.stderr}`);
    return readFileSync(jar);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
