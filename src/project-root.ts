import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** The package root (where package.json names this project), from source or from dist/. */
export function projectRoot(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'flink-jar-gateway') return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`cannot find the flink-jar-gateway package root above ${from}`);
    dir = parent;
  }
}

/** This gateway's version (package.json), e.g. for a User-Agent. */
export function gatewayVersion(): string {
  return (JSON.parse(readFileSync(join(projectRoot(), 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
}
