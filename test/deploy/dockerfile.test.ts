// @lane fast: needs no Flink and no JVM (the fast lane, jest.config.js).
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import { builtinPlugins } from '../../fs-plugins';
import { createRegistry } from '../../src/composition';
import { envNameFor } from '../../src/config/load';
import { coreOptions } from '../../src/config/options';
import { looksSensitive } from '../../src/config/registry';
import { projectRoot } from '../../src/project-root';
import { runProcess } from '../helpers/run-process';
import { assignments, copyPaths, dockerignoreMatcher, type Instruction, parseDockerfile, type Stage, workdirAt } from './dockerfile';

// No container engine here: this reads the Dockerfile and checks that what it copies and runs exists,
// and simulates the runtime stage's layout with a fresh compile to start the entry point.

const root = projectRoot(__dirname);
const stages = parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'));
const ignored = dockerignoreMatcher(readFileSync(join(root, '.dockerignore'), 'utf8'));
const registry = createRegistry(builtinPlugins);
const finalStage = stages.at(-1)!;
const all = (stage: Stage, keyword: string): Instruction[] => stage.instructions.filter((i) => i.keyword === keyword);
const stageNamed = (name: string): Stage | undefined => stages.find((s) => s.name === name);

/** Every file under a repository path (directories walked; node_modules and target never exist in a clean context). */
function filesUnder(rel: string): string[] {
  const abs = join(root, rel);
  if (!statSync(abs).isDirectory()) return [rel];
  return readdirSync(abs).flatMap((n) => filesUnder(posix.join(rel, n)));
}

/** Absolute image path of a COPY destination or ENTRYPOINT argument. */
function imagePath(stage: Stage, ins: Instruction, p: string): string {
  return posix.normalize(p.startsWith('/') ? p : posix.join(workdirAt(stage, ins), p)).replace(/(.)\/$/, '$1');
}

/** Where a COPY puts things: <dir>/<basename> per source for a directory destination ("./", several sources), else the destination. */
function copyTargets(stage: Stage, ins: Instruction): string[] {
  const { sources, dest } = copyPaths(ins);
  return dest.endsWith('/') || sources.length > 1
    ? sources.map((s) => imagePath(stage, ins, posix.join(dest, posix.basename(s))))
    : [imagePath(stage, ins, dest)];
}

describe('Dockerfile', () => {
  it("is multi-stage, and every stage starts from a Node 24 image, but the token bridge's Maven stage (Java 17, as token-bridge/pom.xml)", () => {
    expect(stages.length).toBeGreaterThanOrEqual(3);
    for (const s of stages) {
      if (stageNamed(s.base)) continue;
      if (s.name === 'token-bridge') expect(s.base).toMatch(/^maven:3\.9[.-].*-17$/);
      else expect(s.base).toMatch(/^node:24([.-]|$)/);
    }
    const release = /<maven\.compiler\.release>(\d+)</.exec(readFileSync(join(root, 'token-bridge', 'pom.xml'), 'utf8'))?.[1];
    expect(release).toBe('17');
  });

  it("builds the token bridge jar without its tests from token-bridge/'s pom and main sources, and the runtime image carries it outside the gateway's own directory", () => {
    const bridge = stageNamed('token-bridge')!;
    const copied = all(bridge, 'COPY').flatMap((i) => copyPaths(i).sources);
    expect(copied.sort()).toEqual(['token-bridge/pom.xml', 'token-bridge/src/main']);
    const run = all(bridge, 'RUN')
      .map((i) => i.rest)
      .join('\n');
    expect(run).toMatch(/\bmvn\b.*\bpackage\b/);
    expect(run).toContain('-Dmaven.test.skip=true');
    // The pom's finalName is the jar's name.
    const finalName = /<finalName>([^<]+)</.exec(readFileSync(join(root, 'token-bridge', 'pom.xml'), 'utf8'))?.[1];
    const fromBridge = all(finalStage, 'COPY').filter((i) => i.flags.get('from') === 'token-bridge');
    expect(fromBridge.map((i) => copyPaths(i).sources)).toEqual([[`/build/target/${finalName}.jar`]]);
    // Where the Kubernetes example's init containers copy it from.
    expect(fromBridge.flatMap((i) => copyTargets(finalStage, i))).toEqual([`/opt/token-bridge/${finalName}.jar`]);
    const example = readFileSync(join(root, 'examples', 'kubernetes', 'flinkdeployment-session.yaml'), 'utf8');
    expect(example).toContain(`/opt/token-bridge/${finalName}.jar`);
    // Nothing of the bridge's tests or build output reaches the context.
    for (const p of [
      'token-bridge/target/flink-jar-gateway-token-bridge.jar',
      'token-bridge/src/test/java/X.java',
      'token-bridge/README.md',
    ])
      expect({ p, ignored: ignored(p) }).toEqual({ p, ignored: true });
  });

  it('builds with npm ci and npm run build, then drops the dev dependencies', () => {
    const build = stageNamed('build');
    expect(build).toBeDefined();
    const run = all(build!, 'RUN')
      .map((i) => i.rest)
      .join('\n');
    const order = ['npm ci', 'npm run build', 'npm prune --omit=dev'].map((cmd) => run.indexOf(cmd));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it('copies from the build context only what exists and what .dockerignore lets through', () => {
    const sources = stages.flatMap((s) => all(s, 'COPY').filter((i) => !i.flags.has('from'))).flatMap((i) => copyPaths(i).sources);
    expect(sources.length).toBeGreaterThan(0);
    for (const src of sources) {
      expect({ src, exists: existsSync(join(root, src)) }).toEqual({ src, exists: true });
      for (const file of filesUnder(src)) expect({ file, ignored: ignored(file) }).toEqual({ file, ignored: false });
    }
    expect(all(finalStage, 'ADD')).toEqual([]);
  });

  it('keeps caches, build output, tests and anything secret-looking out of the build context', () => {
    for (const p of [
      'node_modules/express/index.js',
      'dist/src/main.js',
      '.tmp/venv/bin/pip',
      '.git/config',
      'test/unit/x.test.ts',
      'bench/main.ts',
      'embedded-flink/target/embedded-flink.jar',
      '.env',
      'src/.env',
      'src/config/.env.local',
      'bin/id.pem',
      '.npmrc',
      'npm-debug.log',
    ]) {
      expect({ p, ignored: ignored(p) }).toEqual({ p, ignored: true });
    }
  });

  it('copies from the build stages only what each copied in or produced (npm ci, npm run build, mvn package)', () => {
    const outDir = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8')).compilerOptions.outDir as string;
    for (const stage of stages) {
      for (const ins of all(stage, 'COPY').filter((i) => i.flags.has('from'))) {
        const from = stageNamed(ins.flags.get('from')!);
        expect(from).toBeDefined();
        const runs = all(from!, 'RUN').map((i) => i.rest);
        const produced = all(from!, 'COPY').flatMap((c) => copyTargets(from!, c));
        const wd = workdirAt(from!, from!.instructions.at(-1)!);
        if (runs.some((r) => r.includes('npm ci'))) produced.push(posix.join(wd, 'node_modules'));
        if (runs.some((r) => r.includes('npm run build'))) produced.push(posix.join(wd, outDir));
        if (runs.some((r) => /\bmvn\b.*\bpackage\b/.test(r))) produced.push(posix.join(wd, 'target'));
        for (const src of copyPaths(ins).sources) {
          const ok = produced.some((p) => src === p || src.startsWith(`${p}/`));
          expect({ src, producedByStage: ok }).toEqual({ src, producedByStage: true });
        }
      }
    }
  });

  it("runs as uid 9999 (the Flink image's), exposes rest.port and checks /gateway/v1/health with node", () => {
    const user = all(finalStage, 'USER').at(-1);
    expect(user?.rest).toMatch(/^9999(:9999)?$/);
    expect(all(finalStage, 'EXPOSE').flatMap((i) => i.rest.split(/\s+/))).toContain(String(coreOptions.restPort.default));
    const health = all(finalStage, 'HEALTHCHECK').at(-1);
    expect(health?.rest).toMatch(/^CMD\s+\[/);
    // Exec form, with node: the slim base image has neither curl nor wget.
    const cmd = JSON.parse(health!.rest.replace(/^CMD\s+/, '')) as string[];
    expect(cmd.slice(0, 2)).toEqual(['node', '-e']);
    expect(cmd[2]).toContain('/gateway/v1/health');
    expect(cmd[2]).toContain(envNameFor(coreOptions.restPort.key));
  });

  it('bakes in no secret: no ARG or ENV that looks like a credential, and ENV names only known, non-sensitive gateway options', () => {
    const vars = stages.flatMap((s) => [...all(s, 'ARG'), ...all(s, 'ENV')]).flatMap((i) => [...assignments(i)]);
    for (const [name, value] of vars) {
      expect({ name, looksSensitive: looksSensitive(name) || /key|token|secret|passw|credential|auth/i.test(name) }).toEqual({
        name,
        looksSensitive: false,
      });
      expect({ name, value: /AKIA[0-9A-Z]{16}|-----BEGIN|sig=|sv=20/.test(value ?? '') }).toEqual({ name, value: false });
      if (name.startsWith('FLINK_GATEWAY_')) {
        const def = registry.all().find((d) => !d.key.includes('<') && envNameFor(d.key) === name);
        expect({ name, option: def?.key }).toEqual({ name, option: expect.any(String) });
        expect(registry.isSensitive(def!.key)).toBe(false);
      }
    }
    const copied = stages.flatMap((s) => all(s, 'COPY')).flatMap((i) => copyPaths(i).sources);
    expect(copied.filter((s) => /(^|\/)\.(npmrc|env)|\.pem$|secrets?/i.test(s))).toEqual([]);
  });

  it('ENTRYPOINT starts bin/flink-jar-gateway.js, which runs in the runtime layout after npm run build', async () => {
    const entry = all(finalStage, 'ENTRYPOINT').at(-1)!;
    expect(entry.exec).toEqual(['node', 'bin/flink-jar-gateway.js']);
    const script = imagePath(finalStage, entry, entry.exec![1]!);
    const copiedTo = all(finalStage, 'COPY').flatMap((c) => copyTargets(finalStage, c));
    expect(copiedTo.some((d) => script.startsWith(`${d}/`))).toBe(true);
    // The runtime stage's layout under its WORKDIR: what it copies from the build stage, with dist/
    // compiled fresh (not the shared dist/, which other runs may be rewriting).
    const appDir = workdirAt(finalStage, entry);
    const layout = mkdtempSync(join(tmpdir(), 'fjg-image-'));
    try {
      const tsc = await runProcess(
        process.execPath,
        [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.build.json'), '--outDir', join(layout, 'dist')],
        { timeoutMs: 600_000 },
      );
      expect(tsc.stdout + tsc.stderr).toBe('');
      expect(tsc.status).toBe(0);
      for (const d of copiedTo.filter((p) => p.startsWith(`${appDir}/`))) {
        const rel = posix.relative(appDir, d);
        if (!rel || rel.startsWith('..') || rel === 'dist' || rel === 'node_modules') continue;
        expect({ rel, exists: existsSync(join(root, rel)) }).toEqual({ rel, exists: true });
        cpSync(join(root, rel), join(layout, rel), { recursive: true });
      }
      // The pruned node_modules of the image is a subset of the repository's.
      symlinkSync(join(root, 'node_modules'), join(layout, 'node_modules'), 'dir');
      expect(existsSync(join(layout, 'dist', 'src', 'main.js'))).toBe(true);
      const r = await runProcess(process.execPath, [join(layout, entry.exec![1]!), '--help'], { cwd: layout, timeoutMs: 120_000 });
      expect(r.stderr).toBe('');
      expect(r.status).toBe(0);
      expect(r.stdout).toContain('gateway.cluster.rest-url');
    } finally {
      rmSync(layout, { recursive: true, force: true });
    }
    // A full type-check of the project: seconds when idle, minutes on a machine loaded by other work.
  }, 900_000);
});
